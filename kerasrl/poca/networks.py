"""MA-POCA's centralised critic (ML-Agents' ``MultiAgentNetworkBody`` with value heads).

One body gives two estimates, both over a variable number of group members (entities):

* the group value ``V(s_1, ..., s_n)``: every member's observations embedded alike
  (``obs_embedding``);
* the counterfactual baseline of agent ``i``, ``B_i(s_i, (s_j, a_j)_{j≠i})``: its own observations
  embedded as in ``V``, each groupmate's observations and action with ``obs_action_embedding``,
  so that the baseline asks "what would the group get, whatever ``i`` does?".

Then masked residual self-attention pools the entities (:mod:`kerasrl.models.attention`), dense
layers encode the pooled vector, the number of members is appended (scaled to ``[-1, 1]``) and one
value head per reward signal reads it (the count is scaled by the largest group seen so far,
``max_entities``, as ML-Agents' ``_current_max_agents``). Attention and the mean make both estimates independent
of the members' order. Vector observations only (through the actor's normaliser, when it has one).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import keras
import tensorflow as tf

from kerasrl.fields import Field
from kerasrl.models.actor_critic import ModelConfigError
from kerasrl.models.attention import EntityEmbedding, ResidualSelfAttention, masked_count_feature
from kerasrl.models.encoders import VectorEncoder, kernel_initializer
from kerasrl.models.normalizer import Normalizer
from kerasrl.settings import NetworkSettings
from kerasrl.spec import BehaviorSpec


def check_poca_spec(spec: BehaviorSpec, network: NetworkSettings) -> None:
    """What the centralised critic cannot take is a ``ModelConfigError`` saying so."""
    if spec.visual_observation_shapes or not spec.vector_observation_size:
        raise ModelConfigError("the poca trainer's critic takes vector observations only (no cameras yet).")
    if spec.is_hybrid:
        raise ModelConfigError("the poca trainer takes discrete or continuous actions, not both at once.")
    if network.use_recurrent:
        raise ModelConfigError("the poca trainer has no recurrent critic yet; set use_recurrent: false (memory: null).")


class POCACritic(keras.Model):
    """The centralised critic: ``values`` (the group value) and ``baselines`` (each agent's
    counterfactual baseline), one ``[B]`` tensor per reward signal each."""

    def __init__(self, spec: BehaviorSpec, stream_names: Sequence[str], network: Optional[NetworkSettings] = None,
                 normalizer: Optional[Normalizer] = None, seed: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        network = NetworkSettings() if network is None else network
        check_poca_spec(spec, network)
        self.spec = spec
        self.stream_names = list(stream_names)
        self.branches = list(spec.discrete_branches)
        self.normalizer = normalizer
        units, act, init = network.hidden_units, network.activation, network.initializer

        def seed_of(k: int) -> Optional[int]:
            return None if seed is None else seed * 1000 + 500 + k

        self.obs_embedding = EntityEmbedding(units, seed_of(1), act, init, name="obs_embedding")
        self.obs_action_embedding = EntityEmbedding(units, seed_of(2), act, init, name="obs_action_embedding")
        self.self_attention = ResidualSelfAttention(units, seed=seed_of(3), name="self_attention")
        self.body = VectorEncoder(units, network.num_layers, seed=seed_of(4), activation=act, initializer=init,
                                  name="body")
        #: The most group members seen (the scale of the member count; ``note_group_size`` grows it).
        self.max_entities = self.add_weight(name="max_entities", shape=(), initializer=keras.initializers.Constant(1.0),
                                            trainable=False)
        self.value_heads = {name: keras.layers.Dense(1, kernel_initializer=kernel_initializer(init, "value", seed_of(10 + i)),
                                                     name=f"{name}_value")
                            for i, name in enumerate(self.stream_names)}
        self.baselines(*self.dummy_inputs(1, 1))
        self.values(*self.dummy_inputs(1, 1)[:2], self.dummy_inputs(1, 1)[3])

    def dummy_inputs(self, batch: int, width: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """Zero ``(own observations, groupmates' observations, their actions, their mask)``."""
        size = self.spec.vector_observation_size
        actions = (tf.zeros([batch, width, len(self.branches)], tf.int32) if self.branches
                   else tf.zeros([batch, width, self.spec.action_size]))
        return tf.zeros([batch, size]), tf.zeros([batch, width, size]), actions, tf.zeros([batch, width])

    def note_group_size(self, members: int) -> bool:
        """Scale the member count by at least ``members`` from now on (the largest group seen);
        whether the scale grew."""
        if members > float(self.max_entities.numpy()):
            self.max_entities.assign(float(members))
            return True
        return False

    def _normalized(self, obs: tf.Tensor) -> tf.Tensor:
        return obs if self.normalizer is None else self.normalizer(obs)

    def _action_features(self, actions: tf.Tensor) -> tf.Tensor:
        """Each branch's one-hot side by side (discrete), or the actions (continuous)."""
        if not self.branches:
            return tf.cast(actions, tf.float32)
        actions = tf.cast(actions, tf.int32)
        return tf.concat([tf.one_hot(actions[..., k], b) for k, b in enumerate(self.branches)], axis=-1)

    def _heads(self, entities: tf.Tensor, mask: tf.Tensor) -> dict[str, tf.Tensor]:
        """Attention over the embedded entities, the body, the member count, the value heads."""
        pooled = self.self_attention(entities, mask)
        features = tf.concat([self.body(pooled), masked_count_feature(mask, self.max_entities)], axis=-1)
        return {name: tf.squeeze(head(features), -1) for name, head in self.value_heads.items()}

    def _mates(self, own: tf.Tensor, mates: tf.Tensor) -> tf.Tensor:
        """The groupmates' observations ``[B, M, V]`` through the normaliser."""
        size = self.spec.vector_observation_size
        shape = tf.shape(mates)
        flat = self._normalized(tf.reshape(tf.cast(mates, own.dtype), [-1, size]))
        return tf.reshape(flat, [shape[0], shape[1], size])

    def _value_entities(self, own_entity: tf.Tensor, mates: tf.Tensor) -> tf.Tensor:
        return tf.concat([own_entity, self.obs_embedding(mates)], axis=1)

    def _baseline_entities(self, own_entity: tf.Tensor, mates: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        mates_in = tf.concat([mates, self._action_features(actions)], -1)
        return tf.concat([own_entity, self.obs_action_embedding(mates_in)], axis=1)

    def _members(self, own: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        """The mask of the agent (always real) and its groupmates, ``[B, 1 + M]``."""
        return tf.concat([tf.ones_like(own[:, :1]), tf.cast(mask, own.dtype)], axis=1)

    def values(self, own: tf.Tensor, mates: tf.Tensor, mask: tf.Tensor) -> dict[str, tf.Tensor]:
        """The group value of the agent and its groupmates (``mates`` ``[B, M, V]``, ``mask`` ``[B, M]``)."""
        own_entity = self.obs_embedding(self._normalized(own)[:, None, :])
        return self._heads(self._value_entities(own_entity, self._mates(own, mates)), self._members(own, mask))

    def baselines(self, own: tf.Tensor, mates: tf.Tensor, actions: tf.Tensor, mask: tf.Tensor) -> dict[str, tf.Tensor]:
        """The agent's counterfactual baseline: its observations, its groupmates' observations and actions."""
        own_entity = self.obs_embedding(self._normalized(own)[:, None, :])
        entities = self._baseline_entities(own_entity, self._mates(own, mates), actions)
        return self._heads(entities, self._members(own, mask))

    def estimates(self, own: tf.Tensor, mates: tf.Tensor, actions: tf.Tensor,
                  mask: tf.Tensor) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
        """``(values, baselines)`` in one pass: the agent's embedding and the normalised groupmates
        computed once, then the two sets of entities stacked along the rows through one attention,
        body and heads (row for row what ``values`` and ``baselines`` compute apart)."""
        own_entity = self.obs_embedding(self._normalized(own)[:, None, :])
        normalized_mates = self._mates(own, mates)
        entities = tf.concat([self._value_entities(own_entity, normalized_mates),
                              self._baseline_entities(own_entity, normalized_mates, actions)], axis=0)
        members = self._members(own, mask)
        heads = self._heads(entities, tf.concat([members, members], axis=0))
        rows = tf.shape(own)[0]
        return ({name: h[:rows] for name, h in heads.items()}, {name: h[rows:] for name, h in heads.items()})

    def call(self, inputs: Mapping[str, tf.Tensor]) -> dict[str, Any]:
        """Both estimates of a batch of stored fields (``Field`` names)."""
        own, mates = inputs[Field.VECTOR_OBS], inputs[Field.GROUPMATE_VECTOR_OBS]
        values, baselines = self.estimates(own, mates, inputs[Field.GROUPMATE_ACTIONS], inputs[Field.GROUPMATE_MASK])
        return {"values": values, "baselines": baselines}
