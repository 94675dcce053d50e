"""Packaging: the sdist carries everything its own tests need, the wheel carries the sample configs.

The build checks run ``setup.py`` on this source tree (no network, ~1 s each); they are skipped
where the tests run from an unpacked sdist against an installed kerasrl
(``benchmarks/check_sdist.sh`` removes the unpacked sources there). That script is the full
check: it builds the sdist, installs it into a fresh venv and runs the sdist's tests.
"""
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kerasrl.configs import available_configs, config_path
from kerasrl.exception import TrainerConfigError
from kerasrl.settings import TrainerConfig, load_trainer_config

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_CONFIGS = ["acrobot", "cartpole_zoo", "halfcheetah_ppo", "hopper_ppo", "lstm_mlp_critic", "lstm_sb3",
                   "lunarlander",
                   "offline_bc", "pendulum", "pendulum_sb3", "sac_cartpole", "sac_halfcheetah", "sac_pendulum",
                   "trainer_config", "visual_sb3"]

source_tree = pytest.mark.skipif(
    not ((ROOT / "setup.py").is_file() and (ROOT / "kerasrl" / "_buffer.pyx").is_file()),
    reason="not a kerasrl source tree (the tests run against an installed kerasrl)",
)

SDIST_MUST_HOLD = [
    "README.md",
    "mkdocs.yml",
    "docs/index.md",
    "docs/hooks/reference.py",
    "examples/fit_keras.py",
    "setup.py",
    "pyproject.toml",
    "MANIFEST.in",
    "tests/conftest.py",
    "tests/buffer_reference.py",
    "tests/data/checkpoints_v0_1/discrete/Simple1D/checkpoint",
    "tests/data/checkpoints_v0_1/discrete/Simple1D/model-101.index",
    "tests/data/checkpoints_v0_1/discrete/Simple1D/model-101.data-00000-of-00001",
    "tests/data/checkpoints_v0_1/discrete/expected.npz",
    "tests/data/checkpoints_v0_1/continuous_recurrent/Simple1D/checkpoint",
    "tests/data/checkpoints_v0_1/continuous_recurrent/expected.npz",
    "tests/data/mlagents_0_9_trainer_config.yaml",
    "examples/train_ppo.py",
    "benchmarks/bench_ppo.py",
    "kerasrl/configs/__init__.py",
    "kerasrl/configs/cartpole_zoo.yaml",
    "kerasrl/configs/trainer_config.yaml",
    "kerasrl/_buffer.pyx",
    "kerasrl/_kernels.pyx",
    "kerasrl/py.typed",
    "kerasrl/protos/unity_protocol.proto",
    "kerasrl/protos/unity_protocol_pb2.pyi",
    "tools/generate_protos.py",
    "tests/unity_standin/StandIn.x86_64",
]
BUILD_PRODUCTS = (".so", ".pyd", ".c", ".pyc", ".pyo", ".html")


def _setup_py(tmp_path: Path, *command: str) -> None:
    """Run ``setup.py`` on this tree with its egg-info written under tmp_path, not into the tree."""
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path), *command],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


@source_tree
def test_sdist_holds_what_its_tests_need(tmp_path):
    _setup_py(tmp_path, "sdist", "-d", str(tmp_path))
    (sdist,) = tmp_path.glob("kerasrl-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name and m.isfile()}
        missing = [name for name in SDIST_MUST_HOLD if name not in members]
        assert not missing, f"missing from the sdist: {missing}"
        tests_here = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py"))
        assert set(tests_here) <= set(members), sorted(set(tests_here) - set(members))
        products = sorted(n for n in members if n.endswith(BUILD_PRODUCTS) or "__pycache__" in n)
        assert not products, f"build products in the sdist: {products}"
        assert members["tests/unity_standin/StandIn.x86_64"].mode & 0o111, "the stand-in player must stay executable"
        for name in ("tests/data/checkpoints_v0_1/discrete/expected.npz",
                     "tests/data/checkpoints_v0_1/discrete/Simple1D/model-101.data-00000-of-00001"):
            assert tar.extractfile(members[name]).read() == (ROOT / name).read_bytes(), name


@source_tree
def test_wheel_package_data_holds_the_sample_configs(tmp_path):
    lib = tmp_path / "lib"
    _setup_py(tmp_path, "build_py", "--build-lib", str(lib))  # what the wheel gets besides the compiled cores
    for name in SHIPPED_CONFIGS:
        assert (lib / "kerasrl" / "configs" / f"{name}.yaml").is_file(), name
    assert (lib / "kerasrl" / "configs" / "__init__.py").is_file()
    assert (lib / "kerasrl" / "py.typed").is_file()
    assert not [p for p in lib.rglob("*") if p.suffix in (".c", ".so", ".html")]


def test_available_configs_are_the_shipped_ones():
    assert available_configs() == SHIPPED_CONFIGS


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_config_path_finds_and_loads_every_shipped_config(name):
    path = config_path(name)
    assert isinstance(path, str) and Path(path).is_file()
    assert Path(path).name == f"{name}.yaml" and Path(path).parent.name == "configs"
    assert config_path(f"{name}.yaml") == path
    config = load_trainer_config(path)
    assert isinstance(config, TrainerConfig)


@pytest.mark.parametrize("name", ["cartpole", "config/cartpole_zoo.yaml", "cartpole_zoo.yml", "__init__", ""])
def test_config_path_unknown_name_lists_the_available_ones(name):
    with pytest.raises(TrainerConfigError) as error:
        config_path(name)
    message = str(error.value)
    assert "\n" not in message
    assert repr(name) in message
    for available in SHIPPED_CONFIGS:
        assert available in message
