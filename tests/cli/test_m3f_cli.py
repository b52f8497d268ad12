"""``bnpjax demo m3f`` and ``bnpjax fit m3f`` (M3F and iPM3F), bad ratings with status 2."""

import numpy as np

from bnpjax.cli import main


def test_cli_demo_and_fit(tmp_path, capsys):
    short = ["--num-samples", "10", "--num-warmup", "5", "--num-chains", "1", "--no-progress"]
    assert main(["demo", "m3f", "--out-dir", str(tmp_path), *short]) == 0
    assert "test NMAE" in capsys.readouterr().out
    assert (tmp_path / "bnpjax_demo_m3f.nc").stat().st_size > 0
    assert (tmp_path / "bnpjax_demo_m3f_thresholds.png").stat().st_size > 0
    # 4 users x 3 items, 9 of 12 pairs observed, every rating level present
    u = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3])
    v = np.array([0, 1, 1, 2, 0, 2, 0, 1, 2])
    y = np.array([1, 2, 3, 1, 2, 3, 3, 2, 1])
    rows = ["user,item,rating"] + [f"{a},{b},{c}" for a, b, c in zip(u, v, y, strict=True)]
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "t.csv").write_text("user,item,rating\n0,2,2\n1,0,1\n")
    out = tmp_path / "fit.nc"
    args = ["fit", "m3f", "--data", str(tmp_path / "r.csv"), "--test", str(tmp_path / "t.csv")]
    assert main([*args, "--out", str(out), "--rank", "2", "--margin", "1", *short]) == 0
    assert "test NMAE" in capsys.readouterr().out and out.stat().st_size > 0
    ipm3f = ["--sampler", "ipm3f", "--feature-step", "parallel", "--margin", "1"]
    assert main([*args, *ipm3f, "--out", str(tmp_path / "ipm3f.nc"), *short]) == 0
    assert "test NMAE" in capsys.readouterr().out
    (tmp_path / "bad.csv").write_text("user,item,rating\n0,0,2.5\n1,1,1\n")
    assert main(["fit", "m3f", "--data", str(tmp_path / "bad.csv"), *short]) == 2
    assert "line 2, column 'rating': 2.5 is not a rating level" in capsys.readouterr().err
