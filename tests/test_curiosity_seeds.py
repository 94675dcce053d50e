"""benchmarks/curiosity_seeds.py's ``--set`` reaches the trainer section and its curiosity signal."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("curiosity_seeds", ROOT / "benchmarks" / "curiosity_seeds.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["curiosity_seeds"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("curiosity_seeds", None)


def section(bench):
    return {**bench.SETTINGS, "reward_signals": {name: dict(signal)
                                                 for name, signal in bench.SETTINGS["reward_signals"].items()}}


def test_set_overrides_a_trainer_key_and_a_curiosity_key_with_yaml_values(bench):
    target = section(bench)
    bench.apply_overrides(target, ["beta=0.03", "curiosity.learning_rate=1e-4", "curiosity.encoding_size=256"])
    assert target["beta"] == 0.03 and isinstance(target["beta"], float)
    assert target["reward_signals"]["curiosity"]["learning_rate"] == pytest.approx(1e-4)
    assert target["reward_signals"]["curiosity"]["encoding_size"] == 256
    assert target["reward_signals"]["extrinsic"] == bench.SETTINGS["reward_signals"]["extrinsic"]
    assert bench.SETTINGS["reward_signals"]["curiosity"]["learning_rate"] == pytest.approx(3e-4)


@pytest.mark.parametrize("item, message", [
    ("gail.gamma=0.9", "no reward signal 'gail'"),
    ("beta", "--set needs KEY=VALUE, not 'beta'"),
])
def test_set_rejects_an_unknown_signal_or_a_missing_value_by_name(bench, item, message):
    target = section(bench)
    with pytest.raises(SystemExit, match=message):
        bench.apply_overrides(target, [item])
    assert target == section(bench)
