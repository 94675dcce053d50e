"""``kerasrl export`` of a run folder without a checkpoint: the advice fits the export command
(it has no --run-id), while kerasrl-learn keeps its --run-id advice."""
import yaml

from kerasrl.cli.tools import main as tool
from kerasrl.trainers.checkpoint import RUN_ID_ADVICE


def test_export_without_a_checkpoint_asks_to_check_the_run_folder(tmp_path, capsys):
    run = tmp_path / "nock"
    (run / "models" / "CartPole-v1").mkdir(parents=True)
    record = {"behaviors": {"CartPole-v1": {"hidden_units": 8, "num_layers": 1}},
              "command_line": "kerasrl-learn --env CartPole-v1 --run-id nock"}
    (run / "configuration.yaml").write_text(yaml.safe_dump(record))
    assert tool(["export", str(run), "--no-onnx"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (f"kerasrl export: error: The model {run / 'models' / 'CartPole-v1'} "
                                            "could not be found. Check the run folder path.")
    assert "Traceback" not in err and "--run-id" not in err and "--run-id" in RUN_ID_ADVICE
