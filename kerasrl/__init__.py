"""kerasrl: the Unity ML-Agents trainer stack (PPO, reward signals, BC) on TensorFlow 2 and Keras 3."""
__version__ = "0.1.0"
