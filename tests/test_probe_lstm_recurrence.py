"""benchmarks.probe_lstm_recurrence at a tiny shape: one process per thread count, a row per
contender with its ratio to torch's step (or another reference's), and the shapes it
names."""
import subprocess
import sys

import pytest

from benchmarks.harness import cpu_model
from benchmarks.probe_lstm_recurrence import SHAPES, shape_sizes, table
from tests.conftest import REPO_ROOT


def test_it_times_every_contender_at_each_thread_count():
    command = [sys.executable, "-m", "benchmarks.probe_lstm_recurrence", "--shapes", "2x3x4x5",
               "--precisions", "float32,bf16", "--threads", "1,2", "--rounds", "1",
               "--steps", "1", "--warmup", "1"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    titles = [line for line in result.stdout.splitlines() if not line.startswith(" ")]
    # each process first names the machine it ran on, then its tables
    assert [t.split(",")[0] for t in titles[::3]] == ["machine: " + cpu_model()] * 2
    assert all("torch " in t for t in titles[::3])
    assert titles[1:3] + titles[4:] == [f"2x3x4x5 (2, 3, 4, 5) {p}, {t} thread(s)"
                                        for t in (1, 2) for p in ("float32", "bf16")]
    rows = [line.split()[0] for line in result.stdout.splitlines() if line.startswith(" ")]
    assert rows == ["torch", "keras", "hoisted", "hoisted-generic"] * 4
    # torch's bfloat16 LSTM, where this CPU has no kernel for it, is a line saying so
    failed = [line for line in result.stdout.splitlines() if "could not run" in line]
    assert all(line.split()[0] == "torch" for line in failed) and len(failed) in (0, 2)


def test_the_topic_guided_layers_against_their_keras_loops():
    command = [sys.executable, "-m", "benchmarks.probe_lstm_recurrence", "--shapes", "2x3x4x5",
               "--precisions", "bf16", "--threads", "1", "--contenders",
               "tc-keras,tc,moe-keras,moe", "--reference", "tc-keras", "--rounds", "1",
               "--steps", "1", "--warmup", "1"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(" ")]
    assert [row[0] for row in rows] == ["tc-keras", "tc", "moe-keras", "moe"]
    assert rows[0][3:] == ["1.00x", "tc-keras"] and all(row[4] == "tc-keras" for row in rows)


def test_the_table_gives_the_median_ratio_of_the_rounds(capsys):
    table("t", {"torch": [1.0, 2.0, 4.0], "x": [3.0, 2.0, 2.0]})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["torch", "2000.0", "ms", "1.00x", "torch"]
    assert lines[2].split() == ["x", "2000.0", "ms", "1.00x", "torch"]   # ratios 3, 1, 0.5


def test_shapes_by_name_or_sizes():
    assert shape_sizes("pd") == SHAPES["pd"] == (20, 35, 650, 650)
    assert shape_sizes("apnews") == (64, 30, 300, 600)
    assert shape_sizes("2x3x4x5") == (2, 3, 4, 5)
    with pytest.raises(ValueError, match="BxLxN_XxN_H"):
        shape_sizes("2x3")
