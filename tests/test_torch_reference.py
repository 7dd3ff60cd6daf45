"""benchmarks.torch_reference_lm, the authors' tied-LSTM recipe in plain PyTorch: on a tiny
stream it writes one JSON line per epoch and a test line, halves the learning rate after
an epoch that did not improve, scores the test with the best weights, and refuses untied
sizes and a data directory without the three splits in one line."""
import json
import math

import pytest

from benchmarks.torch_reference_lm import main

#: trains tiny runs: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

WORDS = "a b c d e f g h".split()


def corpus(tmp_path):
    for name, lines in (("train", 60), ("valid", 8), ("test", 8)):
        text = "\n".join(" ".join(WORDS[(i + j) % 8] for j in range(7)) for i in range(lines))
        (tmp_path / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    return tmp_path


def test_epochs_halving_and_best_weights(tmp_path):
    out = tmp_path / "curve.jsonl"
    main(["--data-dir", str(corpus(tmp_path)), "--output", str(out), "--emsize", "8",
          "--nhid", "8", "--epochs", "6", "--bptt", "5", "--batch-size", "4",
          "--eval-batch-size", "2", "--lr", "40"])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    header, epochs, final = lines[0], lines[1:-1], lines[-1]
    assert header["vocab"] == 9 and header["tokens"]["train"] == 60 * 7
    assert [e["epoch"] for e in epochs] == list(range(1, 7))
    best = math.inf
    for before, after in zip(epochs, epochs[1:]):
        improved = before["valid_ppl"] < best
        best = min(best, before["valid_ppl"])
        assert after["lr"] == (before["lr"] if improved else before["lr"] / 2)
    assert any(e["lr"] < 40 for e in epochs)          # the rule was exercised
    assert final["best_valid_ppl"] == pytest.approx(min(e["valid_ppl"] for e in epochs))
    assert final["epochs"] == 6 and math.isfinite(final["test_ppl"])
    assert all(e["valid_ppl"] < e["valid_ppl_exact"] for e in epochs)   # / rows, not targets


@pytest.mark.parametrize("flags, message", [
    (["--emsize", "8", "--nhid", "16"], "must equal --emsize"),
    (["--data-dir", "/nonexistent"], "must hold train.txt"),
    (["--batch-size", "1000"], "too short for 1000 lanes"),
    (["--dropout", "1.5"], "must be in [0, 1)"),
])
def test_bad_input_is_one_line(tmp_path, capsys, flags, message):
    argv = ["--data-dir", str(corpus(tmp_path)), "--output", str(tmp_path / "o.jsonl"),
            "--emsize", "8", "--nhid", "8", "--epochs", "1"] + flags
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_info.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("error: ") and message in err[0], err
