"""benchmarks/seed_args.py: the seed sweeps' ``--seeds`` and ``--set`` reach the right keys or name the bad item."""
import copy
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = {"beta": 0.01, "reward_signals": {"extrinsic": {"strength": 1.0, "gamma": 0.99},
                                            "curiosity": {"strength": 0.1, "learning_rate": 3e-4}}}


@pytest.fixture(scope="module")
def args():
    spec = importlib.util.spec_from_file_location("seed_args", ROOT / "benchmarks" / "seed_args.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text, seeds", [("401-404", [401, 402, 403, 404]), ("1,5,9", [1, 5, 9]), ("7", [7])])
def test_seeds_are_a_range_or_a_list(args, text, seeds):
    assert args.parse_seeds(text) == seeds


def test_values_are_read_as_yaml_with_exponent_numbers_as_floats(args):
    assert args.parse_overrides(["lr=1e-4", "n=256", "flag=true", "mode=minibatch"]) == {
        "lr": pytest.approx(1e-4), "n": 256, "flag": True, "mode": "minibatch"}
    assert isinstance(args.parse_value("1e-4"), float)


def test_set_overrides_a_trainer_key_and_a_signal_key(args):
    section = copy.deepcopy(SECTION)
    args.apply_overrides(section, ["beta=0.03", "curiosity.learning_rate=1e-4", "curiosity.encoding_size=256"])
    assert section["beta"] == 0.03
    assert section["reward_signals"]["curiosity"] == {"strength": 0.1, "learning_rate": pytest.approx(1e-4),
                                                      "encoding_size": 256}
    assert section["reward_signals"]["extrinsic"] == SECTION["reward_signals"]["extrinsic"]


@pytest.mark.parametrize("items, message", [
    (["beta=0.03", "gail.gamma=0.9"], "no reward signal 'gail' \\(have extrinsic, curiosity\\)"),
    (["beta=0.03", "beta"], "--set needs KEY=VALUE, not 'beta'"),
    (["=1"], "--set needs KEY=VALUE, not '=1'"),
])
def test_a_bad_item_is_named_and_nothing_is_changed(args, items, message):
    section = copy.deepcopy(SECTION)
    with pytest.raises(SystemExit, match=message):
        args.apply_overrides(section, items)
    assert section == SECTION
