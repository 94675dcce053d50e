"""Decoding the Unity protocol: kerasrl's decoder against ML-Agents' own, on the same player messages.

Two cases are recorded as a Unity player (ML-Agents package 2.x/3.x, Communication API 1.5.0)
sends them: ``vector``, 64 agents with 8 floats each and two masked discrete branches (3, 2);
``visual``, 16 agents with an 84x84 RGB camera, PNG-compressed and channels first as the package
marks it, and two continuous actions. Each recorded step has a few agents that ended their
episode (one of them truncated) and ask for their next decision in the same message, as a player
sends them. The messages are serialized to files (the bytes gRPC carries), then decoded:

* by kerasrl: the message parsed with kerasrl's protobuf classes and turned into step results by
  ``UnityEnvironment._read`` (plus ``_result`` for the agents whose next decision it holds back),
  on an environment that read the player's first message and talks to no player;
* by ML-Agents: the bytes parsed with ``mlagents_envs``' generated classes and turned into
  ``DecisionSteps``/``TerminalSteps`` by ``mlagents_envs.rpc_utils.steps_from_proto``, with the
  ``BehaviorSpec`` of ``behavior_spec_from_proto``. It runs in a separate virtualenv (``--venv``:
  mlagents-envs needs protobuf 3.20 and numpy < 1.24) as a long-lived subprocess of this script
  (``--mlagents-worker``), which times its own loop.

First both decoders' arrays (observations, rewards, done and truncated flags, agent ids, action
masks, group ids and rewards) are checked equal on every message. Then rounds alternate between
the two decoders (the one that goes first alternates too); each round times ``--decodes`` decodes
of the recorded messages, and the table gives the median time of one decode and the ratio
ML-Agents / kerasrl of the medians.

    # mlagents-envs 1.1.0 declares Python 3.10.1-3.10.12 and pins numpy < 1.24, protobuf < 3.21
    # and grpcio <= 1.48.2: a Python 3.10 of its own (3.10.13 here, hence --ignore-requires-python)
    python3.10 -m venv /tmp/mlagents-venv
    /tmp/mlagents-venv/bin/pip install --ignore-requires-python mlagents-envs==1.1.0
    flock /tmp/kerasrl-bench.lock python3 benchmarks/bench_decode.py --venv /tmp/mlagents-venv
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: case -> (behavior, agents, observation shape as the player sends it, continuous actions,
#: discrete branches, agents that end an episode at each step)
CASES: dict[str, tuple[str, int, tuple[int, ...], int, tuple[int, ...], int]] = {
    "vector": ("Walker?team=0", 64, (8,), 0, (3, 2), 4),
    "visual": ("Camera?team=0", 16, (3, 84, 84), 2, (), 1),
}
CHANNELS_FIRST = [1, 2, 2]  # dimension properties: channels, then height and width (translational)


# ---------------------------------------------------------------- recording (kerasrl's protobuf classes)

def camera_image(rng: np.random.Generator, height: int = 84, width: int = 84) -> np.ndarray:
    """A lit, flat-shaded scene as a Unity camera renders one: a sky gradient, a floor under a
    spotlight (brightness falls off in both directions), and a few shaded boxes."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32) / np.float32(max(height, width))
    light = 1.0 - 0.8 * np.hypot(x - rng.uniform(0.2, 0.8), y - rng.uniform(0.6, 0.9))
    sky = np.array([120, 170, 230], np.float32) * (1.0 - 0.3 * y)[..., None]
    floor = np.array([90, 110, 80], np.float32) * np.clip(light, 0.3, 1.0)[..., None]
    image = np.where((y < 0.45)[..., None], sky, floor)
    for _ in range(int(rng.integers(2, 5))):
        top, left = int(rng.integers(height // 3, height - 8)), int(rng.integers(0, width - 8))
        h, w = int(rng.integers(4, 20)), int(rng.integers(4, 20))
        patch = image[top:top + h, left:left + w]
        shade = np.clip(light[top:top + h, left:left + w] + 0.3 * (x[top:top + h, left:left + w] - x[top, left]), 0.2, 1.0)
        patch[:] = rng.integers(30, 255, 3).astype(np.float32) * shade[..., None]
    return np.clip(image, 0, 255).astype(np.uint8)


def _png(image: np.ndarray) -> bytes:
    import tensorflow as tf
    return bytes(tf.io.encode_png(image).numpy())


def _observation(pb: Any, shape: tuple[int, ...], rng: np.random.Generator, truth: list) -> Any:
    if len(shape) == 1:
        values = rng.normal(size=shape).astype(np.float32)
        truth.append(values)
        return pb.ObservationProto(shape=list(shape), float_data=pb.ObservationProto.FloatData(data=values.tolist()))
    image = camera_image(rng, shape[1], shape[2])
    truth.append(image.astype(np.float32) / np.float32(255.0))
    return pb.ObservationProto(shape=list(shape), compression_type=pb.PNG, compressed_data=_png(image),
                               dimension_properties=CHANNELS_FIRST)


def _agent_info(pb: Any, case: str, agent: int, rng: np.random.Generator, done: bool, truncated: bool,
                truth: dict) -> Any:
    _, _, shape, _, branches, _ = CASES[case]
    mask = (rng.random(sum(branches)) < 0.25).tolist() if branches else []
    if branches:
        mask[0] = False  # every branch keeps an allowed action
        mask[branches[0]] = False
    reward = float(np.float32(rng.normal()))
    info = pb.AgentInfoProto(id=agent, reward=reward, done=done, max_step_reached=truncated, action_mask=mask,
                             observations=[_observation(pb, shape, rng, truth.setdefault("obs", []))])
    for key, value in (("ids", agent), ("rewards", reward), ("done", done), ("truncated", truncated),
                       ("masks", [not m for m in mask])):
        truth.setdefault(key, []).append(value)
    return info


def first_message(case: str) -> bytes:
    """The player's first message: its version, capabilities and the behavior's parameters, and the
    behavior's first decisions (as in the handshake), serialized."""
    from kerasrl.protos import unity_protocol_pb2 as pb
    behavior, agents, _, continuous, branches, _ = CASES[case]
    message = pb.UnityMessageProto()
    message.header.status = 200
    init = message.unity_output.rl_initialization_output
    init.name, init.communication_version, init.package_version = "DecodeBench", "1.5.0", "3.0.0"
    init.capabilities.baseRLCapabilities = init.capabilities.concatenatedPngObservations = True
    params = init.brain_parameters.add(brain_name=behavior, is_training=True)
    params.action_spec.num_continuous_actions = continuous
    params.action_spec.num_discrete_actions = len(branches)
    params.action_spec.discrete_branch_sizes.extend(branches)
    rng = np.random.default_rng(0)
    infos = [_agent_info(pb, case, 1000 + i, rng, False, False, {}) for i in range(agents)]
    message.unity_output.rl_output.agentInfos[behavior].value.extend(infos)
    return message.SerializeToString()


def step_message(case: str, seed: int) -> tuple[bytes, list[dict]]:
    """One recorded step: the agents that ended (the first one truncated), then every agent's
    decision; and what was encoded, ``[terminal rows, decision rows]`` (observations as floats in
    [0, 1] channels last, masks True where allowed)."""
    from kerasrl.protos import unity_protocol_pb2 as pb
    behavior, agents, _, _, _, ending = CASES[case]
    rng = np.random.default_rng(seed)
    ended = sorted(rng.choice(agents, ending, replace=False).tolist())
    terminal: dict = {}
    decision: dict = {}
    infos = [_agent_info(pb, case, 1000 + a, rng, True, k == 0, terminal) for k, a in enumerate(ended)]
    infos += [_agent_info(pb, case, 1000 + a, rng, False, False, decision) for a in range(agents)]
    message = pb.UnityMessageProto()
    message.header.status = 200
    message.unity_output.rl_output.agentInfos[behavior].value.extend(infos)
    return message.SerializeToString(), [terminal, decision]


def record(folder: str, messages: int) -> dict[str, list[list[dict]]]:
    """Writes each case's first message (``CASE_init.bin``) and ``messages`` steps (``CASE_K.bin``)
    to ``folder``; returns what each step encoded."""
    truths: dict[str, list[list[dict]]] = {}
    for case in CASES:
        with open(os.path.join(folder, f"{case}_init.bin"), "wb") as f:
            f.write(first_message(case))
        truths[case] = []
        for k in range(messages):
            data, truth = step_message(case, 100 + k)
            with open(os.path.join(folder, f"{case}_{k}.bin"), "wb") as f:
                f.write(data)
            truths[case].append(truth)
    return truths


def recorded(folder: str, case: str) -> tuple[bytes, list[bytes]]:
    """A case's first message and its steps, as recorded in ``folder``."""
    def read(name: str) -> bytes:
        with open(os.path.join(folder, name), "rb") as f:
            return f.read()
    steps = sorted((n for n in os.listdir(folder) if n.startswith(case + "_") and n[len(case) + 1:-4].isdigit()),
                   key=lambda n: int(n[len(case) + 1:-4]))
    return read(f"{case}_init.bin"), [read(n) for n in steps]


# ---------------------------------------------------------------- one form for both decoders' arrays

def canonical(rows: dict[str, Any], kind: str) -> dict[str, np.ndarray]:
    """``rows`` (ids, obs, rewards, ... of the terminal or decision agents) sorted by agent id,
    as arrays named ``KIND_FIELD``."""
    order = np.argsort(np.asarray(rows["ids"], np.int64), kind="stable")
    out = {}
    for key, value in rows.items():
        if value is not None:
            out[f"{kind}_{key}"] = np.asarray(value)[order] if len(order) else np.asarray(value)
    return out


def compare(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray], where: str) -> float:
    """The largest difference between two canonical forms; raises on a missing key or a shape or
    value that differs (observations: within 1e-6, the two decoders scale pixels differently)."""
    if sorted(ours) != sorted(theirs):
        raise AssertionError(f"{where}: fields {sorted(ours)} vs {sorted(theirs)}")
    worst = 0.0
    for key in ours:
        a, b = np.asarray(ours[key]), np.asarray(theirs[key])
        if a.shape != b.shape:
            raise AssertionError(f"{where}: {key} has shape {a.shape} vs {b.shape}")
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        if diff > (1e-6 if "obs" in key else 0.0):
            raise AssertionError(f"{where}: {key} differs by {diff}")
        worst = max(worst, diff)
    return worst


def encoded_arrays(truth: list[dict], case: str) -> dict[str, np.ndarray]:
    """What :func:`step_message` encoded (its ``[terminal, decision]`` rows), in the canonical form."""
    terminal, decision = ({k: v for k, v in rows.items() if k != "done"} for rows in truth)
    del decision["truncated"]
    if not CASES[case][4]:  # no discrete actions: no masks
        del decision["masks"]
    del terminal["masks"]  # masks are for deciding agents
    for rows in (terminal, decision):
        rows["group_id"], rows["group_reward"] = np.zeros(len(rows["ids"]), np.int32), np.zeros(len(rows["ids"]))
    return {**canonical(terminal, "terminal"), **canonical(decision, "decision")}


# ---------------------------------------------------------------- kerasrl's decoder

class KerasrlDecoder:
    """kerasrl's path from a player's message to step results: a ``UnityEnvironment`` that has
    read the player's first message (what its handshake does) and talks to no player."""

    def __init__(self, init: bytes) -> None:
        from kerasrl.envs.unity import environment as unity
        from kerasrl.protos import unity_protocol_pb2 as pb
        self.pb = pb
        env = unity.UnityEnvironment.__new__(unity.UnityEnvironment)
        channels = (unity.EngineConfigurationChannel(), unity.EnvironmentParametersChannel(), unity.StatsSideChannel())
        env._channels = {c.channel_id: c for c in channels}
        env._specs, env._params, env._decision_ids, env._chosen = {}, {}, {}, {}
        env._held, env._last, env._grouped = {}, {}, set()
        env._connected = False
        env._learn_behaviors(pb.UnityMessageProto.FromString(init).unity_output)
        env._connected = True
        self.env = env
        self.behavior = next(iter(env.behavior_specs))

    def decode(self, data: bytes) -> list:
        """The step results of one message: this step's, then those of the decisions it holds back
        (which ``step`` reports next without asking the player)."""
        results = [self.env._read(self.pb.UnityMessageProto.FromString(data), reset=False)[self.behavior]]
        held = self.env._held.pop(self.behavior, None)
        if held:
            results.append(self.env._result(self.behavior, held, 0))
        return results

    def arrays(self, data: bytes) -> dict[str, np.ndarray]:
        """One message decoded, in the canonical form."""
        terminal: dict[str, list] = {}
        decision: dict[str, list] = {}
        for result in self.decode(data):
            for i in range(len(result)):
                rows = terminal if result.done[i] else decision
                for key, value in (("ids", result.agent_ids[i]), ("obs", result.observations[0][i]),
                                   ("rewards", result.rewards[i]), ("group_id", result.group_id_or_zeros[i]),
                                   ("group_reward", result.group_reward_or_zeros[i])):
                    rows.setdefault(key, []).append(value)
                if result.done[i]:
                    rows.setdefault("truncated", []).append(result.truncated[i])
                elif result.action_mask is not None:
                    rows.setdefault("masks", []).append(result.action_mask[i] > 0)
        return {**canonical(terminal, "terminal"), **canonical(decision, "decision")}


# ---------------------------------------------------------------- ML-Agents' decoder (run in its venv)

class MlagentsDecoder:
    """``mlagents_envs``' path from the bytes of a player's message to its steps."""

    def __init__(self, init: bytes) -> None:
        from mlagents_envs.communicator_objects.unity_message_pb2 import UnityMessageProto
        from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto
        self.parse, self.steps_from_proto = UnityMessageProto.FromString, steps_from_proto
        output = self.parse(init).unity_output
        params = output.rl_initialization_output.brain_parameters[0]
        self.behavior = params.brain_name
        self.spec = behavior_spec_from_proto(params, output.rl_output.agentInfos[self.behavior].value[0])

    def decode(self, data: bytes) -> Any:
        output = self.parse(data).unity_output
        return self.steps_from_proto(output.rl_output.agentInfos[self.behavior].value, self.spec)

    def arrays(self, data: bytes) -> dict[str, np.ndarray]:
        decision, terminal = self.decode(data)

        def observation(obs: np.ndarray) -> np.ndarray:  # channels first -> kerasrl's channels last
            return obs.transpose(0, 2, 3, 1) if obs.ndim == 4 else obs
        rows = {"terminal": {"ids": terminal.agent_id, "obs": observation(terminal.obs[0]), "rewards": terminal.reward,
                             "group_id": np.asarray(terminal.group_id, np.int32), "group_reward": terminal.group_reward,
                             "truncated": terminal.interrupted},
                "decision": {"ids": decision.agent_id, "obs": observation(decision.obs[0]), "rewards": decision.reward,
                             "group_id": np.asarray(decision.group_id, np.int32), "group_reward": decision.group_reward,
                             "masks": None if decision.action_mask is None else ~np.concatenate(decision.action_mask, 1)}}
        out: dict[str, np.ndarray] = {}
        for kind, fields in rows.items():
            if len(fields["ids"]):
                out.update(canonical(fields, kind))
        return out


def time_decodes(decode: Callable[[bytes], Any], messages: list[bytes], decodes: int) -> float:
    """Seconds per decode over ``decodes`` decodes of ``messages`` in turn."""
    start = time.perf_counter()
    for i in range(decodes):
        decode(messages[i % len(messages)])
    return (time.perf_counter() - start) / decodes


def mlagents_worker(folder: str) -> int:
    """Answers one JSON line per command on stdin: ``{"check": CASE}`` writes ``CASE_K.npz`` (each
    step decoded, canonical form); ``{"time": CASE, "decodes": N}`` answers the seconds per decode."""
    import mlagents_envs
    from google.protobuf.internal import api_implementation
    decoders = {}
    for case in CASES:
        init, steps = recorded(folder, case)
        decoders[case] = (MlagentsDecoder(init), steps)
    print(json.dumps({"mlagents_envs": mlagents_envs.__version__, "protobuf": api_implementation.Type(),
                      "numpy": np.__version__, "python": sys.version.split()[0]}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "check" in command:
            decoder, steps = decoders[command["check"]]
            for k, data in enumerate(steps):
                np.savez(os.path.join(folder, f"{command['check']}_{k}.npz"), **decoder.arrays(data))
            print(json.dumps({"checked": len(steps)}), flush=True)
        else:
            decoder, steps = decoders[command["time"]]
            print(json.dumps({"seconds": time_decodes(decoder.decode, steps, command["decodes"])}), flush=True)
    return 0


# ---------------------------------------------------------------- the benchmark

class Worker:
    """The ML-Agents decoder in the venv's Python, one JSON line each way."""

    def __init__(self, python: str, folder: str) -> None:
        self.process = subprocess.Popen([python, os.path.abspath(__file__), "--mlagents-worker", folder],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.versions = self.ask(None)

    def ask(self, command: dict | None) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        if command is not None:
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the ML-Agents worker exited (code {self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(10)


def check_case(case: str, folder: str, ours: KerasrlDecoder, worker: Worker) -> float:
    """Both decoders' arrays equal on every recorded step of ``case``; the largest difference."""
    _, steps = recorded(folder, case)
    worker.ask({"check": case})
    worst = 0.0
    for k, data in enumerate(steps):
        compare(ours.arrays(data), encoded_arrays(step_message(case, 100 + k)[1], case), f"{case} step {k}, kerasrl")
        with np.load(os.path.join(folder, f"{case}_{k}.npz")) as theirs:
            worst = max(worst, compare(ours.arrays(data), dict(theirs), f"{case} step {k}"))
    return worst


def run_case(case: str, folder: str, worker: Worker, rounds: int, decodes: int) -> dict[str, float]:
    init, steps = recorded(folder, case)
    ours = KerasrlDecoder(init)
    worst = check_case(case, folder, ours, worker)
    time_decodes(ours.decode, steps, max(1, decodes // 4))  # warm-up (TensorFlow traces its PNG decoder once)
    worker.ask({"time": case, "decodes": max(1, decodes // 4)})
    kerasrl, mlagents = [], []
    for r in range(rounds):
        for side in (("kerasrl", "mlagents") if r % 2 == 0 else ("mlagents", "kerasrl")):
            if side == "kerasrl":
                kerasrl.append(time_decodes(ours.decode, steps, decodes))
            else:
                mlagents.append(worker.ask({"time": case, "decodes": decodes})["seconds"])
    k, m = statistics.median(kerasrl), statistics.median(mlagents)
    return {"kerasrl": k, "mlagents": m, "ratio": m / k, "worst": worst}


def venv_python(venv: str) -> str:
    return os.path.join(venv, "Scripts" if sys.platform == "win32" else "bin", "python")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--venv", default="/tmp/mlagents-venv", help="the virtualenv with mlagents-envs")
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds per case")
    p.add_argument("--decodes", type=int, default=200, help="decodes per round (the vector case: 4x)")
    p.add_argument("--messages", type=int, default=8, help="recorded steps per case")
    p.add_argument("--mlagents-worker", metavar="FOLDER", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mlagents_worker:
        return mlagents_worker(args.mlagents_worker)
    sys.path.insert(0, ROOT)
    with tempfile.TemporaryDirectory(prefix="kerasrl-decode-") as folder:
        record(folder, args.messages)
        worker = Worker(venv_python(args.venv), folder)
        try:
            print(f"ML-Agents' decoder: mlagents-envs {worker.versions['mlagents_envs']} (Python "
                  f"{worker.versions['python']}, numpy {worker.versions['numpy']}, protobuf's "
                  f"{worker.versions['protobuf']} implementation); rounds alternate kerasrl / ML-Agents, "
                  f"{args.rounds} rounds per case, medians; load average {os.getloadavg()[0]:.1f}")
            print("| case | kerasrl per message | ML-Agents per message | ML-Agents / kerasrl |\n| --- | --- | --- | --- |")
            for case, (_, agents, shape, _, _, _) in CASES.items():
                decodes = args.decodes * (4 if case == "vector" else 1)
                row = run_case(case, folder, worker, args.rounds, decodes)
                what = f"{agents} agents, {'x'.join(map(str, shape[1:]))} PNG" if len(shape) == 3 else \
                    f"{agents} agents, {shape[0]} floats"
                print(f"| {what} | {row['kerasrl'] * 1e6:.0f} µs | {row['mlagents'] * 1e6:.0f} µs | "
                      f"{row['ratio']:.2f}× |", flush=True)
        finally:
            worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
