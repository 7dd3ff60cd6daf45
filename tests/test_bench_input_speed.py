"""Tests for ``python -m benchmarks.bench_input_speed``: the alternating order, the summary's
medians and ratios, the flags' one-line errors, and one round end to end on a tiny corpus
(the baseline at ``HEAD`` of a clone, so that this checkout's repository is left as it is)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks import bench_corpus_size
from benchmarks import bench_input_speed as bench
from tests.conftest import REPO_ROOT

PROGRAM = [sys.executable, "-m", "benchmarks.bench_input_speed"]


def test_the_code_that_goes_first_alternates_by_round_and_model():
    codes = ["current", "baseline"]
    assert bench.order_of(0, 0, codes) == ["current", "baseline"]
    assert bench.order_of(1, 0, codes) == ["baseline", "current"]
    assert bench.order_of(0, 1, codes) == ["baseline", "current"]
    assert bench.order_of(1, 1, codes) == ["current", "baseline"]


def test_summary_medians_and_per_round_ratios():
    rows = [{"round": r, "model": "lstm", "code": code, "tokens_per_sec": rate}
            for r, code, rate in [(1, "current", 100.0), (1, "baseline", 200.0),
                                  (2, "baseline", 100.0), (2, "current", 110.0),
                                  (3, "current", 90.0), (3, "baseline", 90.0)]]
    summary = bench.summary(rows, ["lstm"])["lstm"]
    assert summary["median_current"] == 100.0 and summary["median_baseline"] == 100.0
    assert summary["ratio"] == 1.0
    assert summary["round_ratios"] == pytest.approx([0.5, 1.1, 1.0])


@pytest.mark.parametrize("flags, message", [
    (["--dataset", "nowhere"], "no corpus at "),
    (["--train-flags", "--max-steps 5"], "--train-flags: --max-steps is set by the benchmark"),
    (["--models", "nope"], "--models 'nope': unknown nope"),
    (["--rounds", "0"], "argument --rounds: expected an integer from 1"),
])
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--work-dir", str(tmp_path / "work"), "--baseline", "HEAD",
                    "--data-dir", str(tmp_path), *flags])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {message}")
    assert not (tmp_path / "work").exists()


@pytest.mark.slow
def test_one_round_end_to_end_with_a_baseline(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(REPO_ROOT),
                    str(clone)], check=True, capture_output=True)
    spec = bench_corpus_size.CorpusSpec(tokens=20_000, vocabulary=2000, topics=5, seed=1)
    bench_corpus_size.generate_corpus(tmp_path / "data" / "mine", spec)
    output = tmp_path / "speed.json"
    done = subprocess.run(
        [*PROGRAM, "--work-dir", str(tmp_path / "work"), "--baseline", "HEAD",
         "--repository", str(clone), "--data-dir", str(tmp_path / "data"), "--dataset",
         "mine", "--models", "lstm", "--rounds", "1", "--steps", "3", "--train-flags",
         "--hidden-size 16 --embedding-dim 8 --batch-size 8 --seq-len 10",
         "--output", str(output)],
        cwd=REPO_ROOT, capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(output.read_text())
    assert report["complete"] is True
    assert [(r["round"], r["code"]) for r in report["rows"]] == [(1, "current"),
                                                                 (1, "baseline")]
    for row in report["rows"]:
        assert row["train_status"] == "ok" and row["steps_logged"] == 3
        assert row["tokens_per_sec"] > 0 and row["train_peak_rss_mb"] > 0
    for code in ("current", "baseline"):
        assert report["preparations"][code]["prepared_tokens"] == 20_000
    entry = report["summary"]["lstm"]
    current, baseline = (r["tokens_per_sec"] for r in report["rows"])
    assert entry["ratio"] == pytest.approx(current / baseline)
    assert entry["round_ratios"] == pytest.approx([current / baseline])
    assert f"current / baseline {current / baseline:.3f}" in done.stdout
