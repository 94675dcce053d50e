"""Export a trained policy to run without kerasrl: a TensorFlow SavedModel and, with the
optional extra ``kerasrl[onnx]`` (tf2onnx, onnxruntime), ONNX.

The SavedModel (``{behavior}.savedmodel/``) has two signatures over the same inputs:
``deterministic`` (the most likely action: per branch the argmax of the masked probabilities;
for continuous actions ``clip(μ, −s, s) / s``, ``s`` the action scale, 3 by default) and
``stochastic`` (an action sampled inside the graph), both by ``ActorCritic.select_action``.
Inputs, named as the model's (``kerasrl.fields.Field``): ``vector_obs`` (raw: the observation
normalizer is inside the graph), ``visual_obs{i}``, ``action_mask`` (discrete, hybrid),
``memory`` and ``prev_action`` (recurrent; ``prev_action`` for discrete actions with
``recurrent_style: mlagents``). Outputs keep ML-Agents 0.9's exported names: ``action``, ``action_probs`` (discrete:
the masked probabilities; continuous: ``μ``; hybrid: ``μ`` then the masked probabilities; the
hybrid ``action`` is the continuous actions then the branch indices, as floats), ``value_estimate`` (the first reward signal's),
``recurrent_out`` (the next memory, recurrent only). ``{behavior}.onnx`` is the
``deterministic`` function (ONNX opset 13); ``{behavior}.unity.onnx`` is the policy as the ML-Agents
Unity package's inference runs it (``kerasrl.unity_export``; PPO's, BC's and SAC's, not for recurrent policies);
``{behavior}.policy.json`` records the inputs,
outputs, memory size and action layout. Files and folders name a behavior by
``kerasrl.spec.behavior_file_name`` (a team suffix ``?team=1`` as ``_team_1``). Every file is written beside a temporary one and
renamed into place, so an interrupted export leaves the previous one whole.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
from typing import Any, Callable, Iterator, Mapping, Optional

import tensorflow as tf
import yaml

from kerasrl.envs.registry import BUILTIN_ENVS, make_env
from kerasrl.exception import TrainerError
from kerasrl.fields import Field
from kerasrl.models.actor_critic import ActorCritic
from kerasrl.models.distributions import HybridDistribution, MaskedMultiCategorical
from kerasrl.sac.exported import SACExportedPolicy
from kerasrl.sac.networks import SACNetworks
from kerasrl.settings import TrainerSettings, load_trainer_config, trainer_type
from kerasrl.settings.registry import type_of_record
from kerasrl.spec import BehaviorSpec, behavior_file_name
from kerasrl.trainers.checkpoint import (
    BEHAVIOR_FILE,
    WRITE_ERRORS,
    CheckpointSaver,
    export_weights,
    read_behavior_record,
    write_failure,
)
from kerasrl.trainers.trainer import Trainer
from kerasrl.unity_export import save_unity_onnx, unity_contract_supported

logger = logging.getLogger("kerasrl")

#: ML-Agents' ``version_number`` of the exported graph.
VERSION_NUMBER = 2
ONNX_OPSET = 13
ONNX_MISSING = "ONNX export needs the optional extra kerasrl[onnx] (pip install tf2onnx onnxruntime)"
#: Said once per process when an export skips ONNX because tf2onnx is not installed.
ONNX_SKIPPED = "kerasrl: ONNX export skipped: tf2onnx is not installed; pip install 'kerasrl[onnx]' adds the .onnx files."
_onnx_skip_told = False


def onnx_available() -> bool:
    """True when tf2onnx can be imported (the ``kerasrl[onnx]`` extra)."""
    try:
        import tf2onnx  # noqa: F401
    except ImportError:
        return False
    return True


class ExportedPolicy(tf.Module):
    """The acting part of an :class:`ActorCritic` as two ``tf.function``s with flat, named
    tensor inputs (what a SavedModel signature and tf2onnx need)."""

    def __init__(self, model: ActorCritic) -> None:
        super().__init__(name="policy")
        self.model = model
        self.input_names = list(model.input_signature())
        specs = list(model.input_signature().values())
        self.deterministic = tf.function(self._flat(self._deterministic), input_signature=specs)
        self.stochastic = tf.function(self._flat(self._stochastic), input_signature=specs)

    def _flat(self, fn: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]]) -> Callable[..., dict[str, tf.Tensor]]:
        names = self.input_names

        def call(*tensors: tf.Tensor) -> dict[str, tf.Tensor]:
            return fn(dict(zip(names, tensors)))

        return call

    def _outputs(self, out: dict[str, Any], action: tf.Tensor, probs: tf.Tensor) -> dict[str, tf.Tensor]:
        result = {"action": action, "action_probs": probs,
                  "value_estimate": out["values"][self.model.stream_names[0]]}
        if Field.MEMORY_OUT in out:
            result["recurrent_out"] = out[Field.MEMORY_OUT]
        return result

    def _deterministic(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self._act(inputs, deterministic=True)

    def _stochastic(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self._act(inputs, deterministic=False)

    def _act(self, inputs: dict[str, tf.Tensor], deterministic: bool) -> dict[str, tf.Tensor]:
        """The action by ``ActorCritic.select_action`` (sampled with noise drawn in the graph)."""
        model = self.model
        out = model(inputs)
        dist = model.distribution(out, inputs)
        noise = None if deterministic else model.graph_noise(tf.shape(inputs[self.input_names[0]])[0])
        action, _ = model.select_action(dist, noise, deterministic)
        if isinstance(dist, MaskedMultiCategorical):
            probs = dist.probs
        elif isinstance(dist, HybridDistribution):
            probs = tf.concat([out["mu"], dist.categorical.probs], axis=-1)
        else:
            probs = out["mu"]
        return self._outputs(out, action, probs)

    def description(self) -> dict[str, Any]:
        """What a user of the exported files needs to feed and read them."""
        model, spec = self.model, self.model.spec
        outputs = ["action", "action_probs", "value_estimate"] + (["recurrent_out"] if model.use_recurrent else [])
        return {
            "version_number": VERSION_NUMBER,
            "inputs": {k: [None, *v.shape[1:]] for k, v in model.input_signature().items()},
            "outputs": outputs,
            "is_continuous_control": int(not model.is_discrete),
            "action_type": spec.action_type.value,
            "action_output_shape": list(spec.action_shape),
            "memory_size": int(model.memory_size),
            "normalized_inside": model.normalizer is not None,
        }


def _replace_path(tmp: str, path: str) -> None:
    """Move ``tmp`` (file or folder) to ``path``; an old folder is set aside first and removed
    last (put back when the move fails)."""
    if os.path.isdir(path):
        old = path + ".old"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        try:
            os.replace(tmp, path)
        except OSError:
            os.replace(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


@contextlib.contextmanager
def _export_errors(behavior: str, folder: str) -> Iterator[None]:
    """A write error of the block (a full disk, a folder that cannot be written) as one-line
    ``TrainerError`` naming the folder and the cause (the writers leave no temporary file)."""
    try:
        yield
    except WRITE_ERRORS as e:
        raise TrainerError(f"Exporting {behavior} to {folder} failed: {write_failure(e)}. Its checkpoints are intact: "
                           "free some space or make the folder writable, then run kerasrl export on the run folder.") from e


def _tell_onnx_skipped() -> None:
    """Say once per process, on stdout with the run's other information (a clean run's stderr
    stays empty), that ONNX was not written because tf2onnx is missing, and how to get it."""
    global _onnx_skip_told
    if not _onnx_skip_told:
        _onnx_skip_told = True
        print(ONNX_SKIPPED, flush=True)


def save_savedmodel(policy: "ExportedPolicy | SACExportedPolicy", path: str) -> str:
    """Write the SavedModel folder ``path`` with the ``deterministic`` and ``stochastic`` signatures."""
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    signatures = {
        "deterministic": policy.deterministic.get_concrete_function(),
        "stochastic": policy.stochastic.get_concrete_function(),
        "serving_default": policy.deterministic.get_concrete_function(),
    }
    try:
        tf.saved_model.save(policy, tmp, signatures=signatures)
        _replace_path(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def save_onnx(policy: "ExportedPolicy | SACExportedPolicy", path: str) -> str:
    """Write the ``deterministic`` function as ONNX to ``path`` (needs ``kerasrl[onnx]``)."""
    try:
        import tf2onnx
    except ImportError as e:
        raise TrainerError(f"{ONNX_MISSING}; {e}.") from e
    specs = list(policy.model.input_signature().values())
    tmp = path + ".tmp"
    try:
        tf2onnx.convert.from_function(policy.deterministic, input_signature=specs, opset=ONNX_OPSET, output_path=tmp)
        _replace_path(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def export_policy(model: "ActorCritic | SACNetworks", folder: str, behavior: str,
                  onnx: Optional[bool] = None) -> dict[str, str]:
    """Export ``model`` (an actor-critic, or SAC's networks: their actor) into ``folder``:
    ``{behavior}.savedmodel``, ``{behavior}.policy.json`` and, when ``onnx`` (default: when
    tf2onnx is installed), ``{behavior}.onnx`` and ``{behavior}.unity.onnx`` (not for recurrent
    policies: a warning says why it is missing). By default without tf2onnx, one line (once per
    process) says that ONNX was skipped and how to get it. A write that fails is a one-line
    ``TrainerError`` naming the folder and the cause. Returns the paths."""
    with _export_errors(behavior, folder):
        os.makedirs(folder, exist_ok=True)
        name = behavior_file_name(behavior)
        policy = SACExportedPolicy(model) if isinstance(model, SACNetworks) else ExportedPolicy(model)
        paths = {"savedmodel": save_savedmodel(policy, os.path.join(folder, f"{name}.savedmodel"))}
        with_onnx = onnx or (onnx is None and onnx_available())
        if with_onnx:
            paths["onnx"] = save_onnx(policy, os.path.join(folder, f"{name}.onnx"))
            why = unity_contract_supported(model)
            if why:
                logger.warning("%s: no %s.unity.onnx: %s.", behavior, name, why)
            else:
                paths["unity_onnx"] = save_unity_onnx(model, os.path.join(folder, f"{name}.unity.onnx"))
        info_path = os.path.join(folder, f"{name}.policy.json")
        files = {k: os.path.basename(v) for k, v in paths.items()}
        try:
            with open(info_path + ".tmp", "w", encoding="utf-8") as f:
                json.dump({"behavior": behavior, **policy.description(), "files": files}, f, indent=1)
            os.replace(info_path + ".tmp", info_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(info_path + ".tmp")
            raise
    if onnx is None and not with_onnx:
        _tell_onnx_skipped()
    paths["policy_json"] = info_path
    return paths


def export_trainers(trainers: Mapping[str, Trainer]) -> None:
    """The step after training: each behavior's trained model to ``{model_path}/{behavior}.weights.h5``
    (normalizer included) and as a policy (``export_policy``), atomically; only where this
    process writes the results (on several hosts, the chief)."""
    for behavior, trainer in trainers.items():
        if trainer.writes_results:
            model = trainer.trained_model
            with _export_errors(behavior, trainer.model_path):
                export_weights(model, os.path.join(trainer.model_path, f"{behavior_file_name(behavior)}.weights.h5"))
            export_policy(model, trainer.model_path, behavior)


def _run_record(run_dir: str) -> dict[str, Any]:
    path = os.path.join(run_dir, "configuration.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            record = yaml.safe_load(f)
    except OSError as e:
        raise TrainerError(f"{run_dir} is not a kerasrl run folder: {path} cannot be read ({e.strerror or e}).") from e
    if not isinstance(record, dict) or "behaviors" not in record:
        raise TrainerError(f"{path} has no 'behaviors': not written by kerasrl-learn.")
    return record


def _recorded_env_specs(run_dir: str, command_line: Optional[str]) -> dict[str, BehaviorSpec]:
    """For run folders written before checkpoints kept their behavior's spec: the specs of the
    environment that the run's recorded command line names (``--env``, default CartPole-v1)."""
    if not command_line:
        raise TrainerError(f"{run_dir}: its checkpoints keep no {BEHAVIOR_FILE} and its configuration.yaml no "
                           "command line, so the behaviors' specs are unknown.")
    words = shlex.split(command_line)
    env_id = "CartPole-v1"
    for i, word in enumerate(words):
        if word == "--env" and i + 1 < len(words):
            env_id = words[i + 1]
        elif word.startswith("--env="):
            env_id = word.split("=", 1)[1]
    env = make_env(env_id, None if env_id in BUILTIN_ENVS else 1, seed=0)
    try:
        return dict(env.behavior_specs)
    finally:
        env.close()


def export_run(run_dir: str, onnx: Optional[bool] = None) -> dict[str, dict[str, str]]:
    """Export every behavior of the run folder ``run_dir`` (as ``kerasrl-learn`` wrote it) from
    its newest intact checkpoint, into ``run_dir/models/<behavior>/``. Spec, settings and seed
    come from the record beside each behavior's checkpoints (older runs: the settings from
    ``configuration.yaml``, the spec from the environment its command line names)."""
    record = _run_record(run_dir)
    config = load_trainer_config(record["behaviors"])
    older: Optional[dict[str, BehaviorSpec]] = None
    exported = {}
    for behavior in record["behaviors"]:
        folder = os.path.join(run_dir, "models", behavior_file_name(behavior))
        saved = read_behavior_record(folder)
        if saved is not None:
            spec, seed = BehaviorSpec.from_dict(saved["spec"]), int(saved.get("seed") or 0)
        else:
            older = older if older is not None else _recorded_env_specs(run_dir, record.get("command_line"))
            if behavior not in older:
                raise TrainerError(f"{run_dir}: behavior {behavior!r} is not one of the environment's ({sorted(older)}).")
            spec, seed = older[behavior], int(record.get("seed") or 0)
        settings = config.settings_for(behavior)
        kind = saved.get("trainer") if saved is not None else None
        model, objects = _checkpointed_model(behavior, kind, spec, settings, seed)
        CheckpointSaver(folder, 1, **objects).restore(missing_advice="Check the run folder path.")
        exported[behavior] = export_policy(model, folder, behavior, onnx)
    return exported


def _checkpointed_model(behavior: str, kind: Optional[str], spec: BehaviorSpec, settings: TrainerSettings,
                        seed: int) -> tuple["ActorCritic | SACNetworks", dict[str, Any]]:
    """The model to export and the objects that a checkpoint of trainer type ``kind`` (the
    behavior record's "trainer": a registered name, or a class name in runs saved before names
    were recorded; older records lack it: the settings' trainer then) holds."""
    name = type_of_record(kind) if kind is not None else settings.trainer
    trainer_cls = trainer_type(name, f"the record of behavior {behavior}").trainer_cls
    return trainer_cls.checkpointed_model(behavior, spec, settings, seed)
