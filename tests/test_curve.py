"""``evaluate.curve``: a run's validation perplexity and learning rate per epoch, printed and
drawn, from a hand-made ``metrics.json`` (no training); one-line errors without epochs."""
import json

import pytest

from evaluate.curve import main

EPOCHS = [{"epoch": 1, "valid_perplexity": 542.35, "learning_rate": 20.0},
          {"epoch": 2, "valid_perplexity": 330.41, "learning_rate": 20.0},
          {"epoch": 3, "valid_perplexity": 331.0, "learning_rate": 10.0}]


def test_the_curve_is_printed_and_drawn(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text(json.dumps({"epochs": EPOCHS}))
    assert main(["--run", str(tmp_path), "--reference", "105.35"]) == EPOCHS
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["epoch 1: valid perplexity 542.35, learning rate 20",
                       "epoch 2: valid perplexity 330.41, learning rate 20",
                       "epoch 3: valid perplexity 331.00, learning rate 10"]
    png = (tmp_path / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    main(["--run", str(tmp_path), "--output", str(tmp_path / "plots" / "c.png")])
    assert (tmp_path / "plots" / "c.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("metrics, message", [
    (None, "has no metrics.json"),
    ({"epochs": []}, "lists no finished epoch yet"),
])
def test_a_run_without_epochs_is_a_one_line_error(tmp_path, capsys, metrics, message):
    if metrics is not None:
        (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(SystemExit) as exit_info:
        main(["--run", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "learning_curve.png").exists()
