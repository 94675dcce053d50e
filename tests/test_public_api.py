"""``import kerasrl`` gives what a user needs, lazily (no TensorFlow until a TF-backed name is used)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kerasrl

ROOT = Path(__file__).resolve().parents[1]


def test_every_exported_name_resolves():
    for name in kerasrl.__all__:
        assert getattr(kerasrl, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_thing"):
        kerasrl.no_such_thing  # noqa: B018


def _loads_tensorflow(code: str) -> bool:
    code = f"import sys, kerasrl, kerasrl.configs; {code}; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def test_import_settings_envs_and_buffer_do_not_import_tensorflow():
    """The layers below the models stay free of TensorFlow; the trainers (which hold models) load it."""
    assert not _loads_tensorflow("kerasrl.load_trainer_config(kerasrl.configs.config_path('cartpole_zoo')); "
                                 "kerasrl.SimpleEnvManager; kerasrl.Buffer; import kerasrl.envs.registry")
    assert _loads_tensorflow("kerasrl.TrainerController")


def test_documented_trainer_example_trains(tmp_path, monkeypatch):
    """The trainer-config guide's example of the stack by hand, as written, with the run shortened
    through its RunContext."""
    page = (ROOT / "docs" / "guides" / "configuration.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "kerasrl.create_trainers" in b]
    assert "kerasrl.create_trainers" in block and "start_learning(env)" in block
    monkeypatch.chdir(ROOT)
    short = block.replace('kerasrl.RunContext.in_results_dir("results", "cartpole", seed=0)',
                          f'kerasrl.RunContext.in_results_dir({str(tmp_path)!r}, "cartpole", seed=0, max_steps=600)')
    assert short != block
    namespace: dict = {}
    exec(compile(short, "docs/guides/configuration.md", "exec"), namespace)  # noqa: S102
    trainer = namespace["trainers"]["CartPole-v1"]
    assert trainer.get_step == 608 and trainer.update_count == 2  # steps count all 8 copies: 76 × 8
    assert (tmp_path / "cartpole" / "models" / "CartPole-v1" / "checkpoint").exists()
