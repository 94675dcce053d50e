"""Test set-up: quiet TensorFlow, deterministic ops, and the compiled buffer built in place."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
