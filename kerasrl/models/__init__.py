"""Keras layers and models: normalizer, encoders, distributions, actor-critic."""
from kerasrl.models.actor_critic import ActorCritic, ModelConfigError
from kerasrl.models.attention import EntityEmbedding, ResidualSelfAttention
from kerasrl.models.distributions import EPSILON, ClippedGaussian, MaskedMultiCategorical
from kerasrl.models.encoders import VIS_ENCODE_TYPES, VectorEncoder, VisualEncoder
from kerasrl.models.normalizer import Normalizer

__all__ = [
    "ActorCritic", "ClippedGaussian", "EPSILON", "EntityEmbedding", "MaskedMultiCategorical", "ModelConfigError", "Normalizer",
    "ResidualSelfAttention",
    "VIS_ENCODE_TYPES", "VectorEncoder", "VisualEncoder",
]
