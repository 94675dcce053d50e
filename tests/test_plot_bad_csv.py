"""``kerasrl plot`` on a metrics CSV cell that is not a number: one line naming the file, the line
and the column (exit 2), not a traceback; blank cells stay accepted."""
import pytest

from kerasrl.cli.tools import main
from kerasrl.exception import TrainerError
from kerasrl.plot import read_curves

KEY = "Environment/Cumulative Reward"


def write_csv(folder, text):
    folder.mkdir()
    path = folder / "X.csv"
    path.write_text(text)
    return path


def test_a_value_that_is_not_a_number_names_file_line_and_column(tmp_path):
    path = write_csv(tmp_path / "notrun", f"Step,{KEY}\n100,1.5\n200,abc\n300,\n")
    with pytest.raises(TrainerError, match=f"^{path} line 3, column '{KEY}': 'abc' is not a number.$"):
        read_curves(str(tmp_path / "notrun"), KEY)


def test_a_step_that_is_not_a_number_names_the_step_column(tmp_path):
    path = write_csv(tmp_path / "notrun", f"Step,{KEY}\n100,1.5\nten,2.0\n")
    with pytest.raises(TrainerError, match=f"^{path} line 3, column 'Step': 'ten' is not a number.$"):
        read_curves(str(tmp_path / "notrun"), KEY)


def test_blank_values_are_still_left_out(tmp_path):
    write_csv(tmp_path / "run", f"Step,{KEY}\n100,\n200,2.0\n,3.0\n")
    assert read_curves(str(tmp_path / "run"), KEY) == {"X": ([200.0], [2.0])}


def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="plot_runs loads matplotlib (optional extra kerasrl[plot]) before the CSVs")
    path = write_csv(tmp_path / "notrun", f"Step,{KEY}\n100,abc\n200,\n")
    assert main(["plot", str(tmp_path / "notrun"), "-o", str(tmp_path / "d.png")]) == 2
    err = capsys.readouterr().err
    assert err == f"kerasrl plot: error: {path} line 2, column '{KEY}': 'abc' is not a number.\n"
    assert not (tmp_path / "d.png").exists()
