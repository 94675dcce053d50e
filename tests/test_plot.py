"""``kerasrl plot``: learning curves of several runs from their metrics CSVs to one PNG."""
import pytest

from kerasrl.cli.tools import main
from kerasrl.plot import read_curves


def write_run(folder, rows):
    folder.mkdir()
    lines = ["Step,Environment/Cumulative Reward,Losses/Value Loss"] + [f"{s},{r},{v}" for s, r, v in rows]
    (folder / "CartPole-v1.csv").write_text("\n".join(lines) + "\n")


def test_plot_writes_one_png_for_several_runs(tmp_path, capsys):
    write_run(tmp_path / "a", [(100, 10.0, ""), (200, 20.0, 0.5), (300, "nan", 0.4)])
    write_run(tmp_path / "b", [(100, 12.0, 1.0), (200, 30.0, 0.9)])
    assert read_curves(str(tmp_path / "a"), "Environment/Cumulative Reward") == {
        "CartPole-v1": ([100.0, 200.0], [10.0, 20.0])}  # empty and NaN cells are left out
    assert read_curves(str(tmp_path / "a"), "Losses/Value Loss") == {"CartPole-v1": ([200.0, 300.0], [0.5, 0.4])}
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (optional extra kerasrl[plot])")
    from matplotlib.image import imread

    out = tmp_path / "curves.png"
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out),
                 "--key", "Environment/Cumulative Reward", "--key", "Losses/Value Loss"]) == 0
    image = imread(str(out))
    assert image[..., :3].std() > 0.05  # something was drawn
    assert main(["plot", str(tmp_path / "a"), "-o", str(tmp_path / "one.png")]) == 0
    assert image.shape[0] > 1.8 * imread(str(tmp_path / "one.png")).shape[0]  # two panels, one above the other
    assert main(["plot", str(tmp_path / "a"), "--key", "Policy/Entropy", "-o", str(tmp_path / "x.png")]) == 2
    assert "no run of" in capsys.readouterr().err and not (tmp_path / "x.png").exists()
    assert main(["plot", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "is not a folder" in err and err.count("kerasrl plot") == 1, err


def test_plot_without_matplotlib_is_a_clear_error(tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    write_run(tmp_path / "a", [(100, 10.0, 1.0)])
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["plot", str(tmp_path / "a"), "-o", str(tmp_path / "p.png")]) == 2
    assert "pip install matplotlib" in capsys.readouterr().err
