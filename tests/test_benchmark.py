"""Tests for ``python -m benchmarks.run`` (the harness and its sections), at tiny sizes."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run import main
from benchmarks.sections.decoders import DECODERS
from benchmarks.sections.recurrent import cudnn_precision_problem, multiply_adds_per_token
from tests.backend_check import backend_env
from tests.conftest import REPO_ROOT

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

TINY_SIZES = {"--hidden-size": 16, "--input-size": 8, "--num-topics": 4, "--moe-experts": 2,
              "--batch-size": 4, "--seq-len": 5}
TINY_FLAGS = [str(v) for item in TINY_SIZES.items() for v in item]
QUICK = ["--rounds", "1", "--steps", "1", "--warmup", "1"]
#: a synthetic corpus small enough for a few one-epoch runs (as tests/conftest.py's TINY)
TINY_SYNTHETIC = ["--synthetic", "valid_docs=8", "--synthetic", "test_docs=8",
                  "--synthetic", "num_topics=4", "--synthetic", "content_vocab_size=120",
                  "--synthetic", "seed=5"]


def table(text: str, first_column: str) -> list[list[str]]:
    """The rows (cells) of the printed table whose header starts with ``first_column``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.split(" | ")[0].strip() == first_column and " | " in line)
    assert set(lines[start + 1]) <= {"-", "+"}
    rows = []
    for line in lines[start + 2:]:
        if " | " not in line:
            break
        rows.append([cell.strip() for cell in line.split(" | ")])
    return rows


def positive(cell: str) -> float:
    value = float(cell.rstrip("x").replace(",", ""))
    assert math.isfinite(value) and value > 0, cell
    return value


def assert_recurrent_table(out: str, backend: str) -> None:
    """The recurrent section's table at :data:`TINY_SIZES` under the default precisions:
    every layer under each, its figures consistent with each other, under a heading that
    names ``backend``."""
    assert f"recurrent layers under the {backend} backend (" in out
    # multiply-adds per token, from the formulas, for n_x=8, n_h=16, n_f=n_h, T=4, L=5, K=2
    n_x, n_h, T, L, K = 8, 16, 4, 5, 2
    lstm = 4 * n_h * (n_x + n_h)
    tc = 4 * n_h * n_x + 4 * n_h * n_h + 8 * n_h * n_h + 8 * T * n_h / L
    floors = {"keras LSTM": 1.0, "LSTM, x W hoisted": 1.0,
              "TC-LSTM, step by step": tc / lstm,
              "TC-LSTM (layer)": tc / lstm, f"MoE LSTM (K={K})": float(K)}
    rows = table(out, "layer")
    precisions = ("float32", "mixed_bfloat16")          # the default --precisions
    assert [(r[0], r[1]) for r in rows] == [(n, p) for p in precisions for n in floors]
    for name, precision, ms, us, time_ratio, floor, over_floor, speed_up in rows:
        seconds = positive(ms) / 1e3
        assert positive(us) == pytest.approx(seconds * 1e6 / (4 * L), rel=0.05, abs=0.05)
        assert positive(over_floor) == pytest.approx(
            positive(time_ratio) / floors[name], rel=0.02, abs=0.01)
        positive(speed_up)
        assert floor == f"{floors[name]:.3f}x"
    for row in rows:
        if row[0] == "keras LSTM":
            assert row[4] == "1.00x"
        if row[1] == "float32":
            assert row[7] == "1.00x"


def test_recurrent_and_decoders_tables(capsys):
    main(["--sections", "recurrent,decoders", *TINY_FLAGS, "--vocab-sizes", "300",
          "--decoder-batch", "2", "--decoder-seq-len", "3", *QUICK])
    out = capsys.readouterr().out
    assert "backend tensorflow " in out.splitlines()[0]
    assert_recurrent_table(out, "tensorflow")

    decoders = table(out, "V")
    assert [(r[0], r[1]) for r in decoders] == [("300", d) for d in DECODERS]
    for row in decoders:
        positive(row[2])
        positive(row[3])
    assert "command: python -m benchmarks.run --sections recurrent,decoders" in out


def run_under(backend: str, flags: list[str], home: Path) -> subprocess.CompletedProcess:
    """``KERAS_BACKEND=<backend> python -m benchmarks.run FLAGS`` in a process of its own
    (the backend is fixed when Keras is first imported)."""
    env = backend_env(backend, home)
    return subprocess.run([sys.executable, "-m", "benchmarks.run", *flags], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_recurrent_section_runs_under_every_backend(backend, tmp_path):
    """The same table under JAX and PyTorch, with the step compiled their way (nothing here
    compares times: the machine's load decides them)."""
    result = run_under(backend, ["--sections", "recurrent", *TINY_FLAGS, *QUICK], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"backend {backend} " in result.stdout.splitlines()[0]
    assert result.stdout.splitlines()[0].endswith("computing on the CPU")
    assert_recurrent_table(result.stdout, backend)


def test_the_tensorflow_only_sections_refuse_another_backend_in_one_line(tmp_path):
    result = run_under("jax", ["--sections", "recurrent,models,scaling", *QUICK], tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == (
        "error: --sections models,scaling: run under the tensorflow Keras backend only, not "
        "under jax (KERAS_BACKEND=jax); under jax, choose --sections recurrent\n")


def test_reduced_precision_is_refused_only_for_jax_on_a_gpu():
    """Keras's LSTM under JAX on a GPU is cuDNN through jax.experimental.rnn, float32 only
    (on an H200 a mixed_bfloat16 step failed with "Unknown output type bfloat16")."""
    problem = cudnn_precision_problem("jax", "NVIDIA H200", ["float32", "mixed_bfloat16"])
    assert problem.startswith("--precisions mixed_bfloat16: under JAX on a GPU (NVIDIA H200)")
    assert problem.endswith("use --precisions float32")
    assert cudnn_precision_problem("jax", "NVIDIA H200", ["float32"]) is None
    assert cudnn_precision_problem("jax", None, ["float32", "mixed_bfloat16"]) is None
    assert cudnn_precision_problem("torch", "NVIDIA H200", ["mixed_float16"]) is None


def test_multiply_adds_at_the_default_sizes():
    macs = multiply_adds_per_token(input_size=300, hidden_size=600, num_factors=600,
                                   num_topics=50, seq_len=30, num_experts=10)
    assert macs["lstm"] == 2_160_000                 # 4 * 600 * (300 + 600)
    # 720,000 + 1,440,000 + 2,880,000 (per step) + 240,000 / 30 (topic factors per sequence)
    assert macs["tc"] == pytest.approx(5_048_000)
    assert macs["moe"] == 10 * macs["lstm"]
    floor = macs["tc"] / macs["lstm"]
    # 7/3 = 2.333 from the per-step products, plus 8,000 / 2,160,000 from the topic factors
    assert floor == pytest.approx(7 / 3 + 8_000 / 2_160_000)
    assert 2.33 < floor < 2.34


@pytest.mark.parametrize("flags", [["--sections", "nonsense"], ["--models", "lstm,gpt"],
                                   ["--hidden-size", "0"], ["--vocab-sizes", "10,x"],
                                   ["--synthetic", "train_docs"]])
def test_bad_flags_give_one_line(flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(flags)
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err


def test_scaling_section(capsys):
    main(["--sections", "scaling", "--corpus-docs", "20,40,60", "--topic-counts", "2,3,4",
          "--scaling-hidden", "8", *TINY_SYNTHETIC])
    out = capsys.readouterr().out
    rows = table(out, "model")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("lstm", "20", "-"), ("lstm", "40", "-"), ("lstm", "60", "-"),
        ("tcnlm", "20", "2"), ("tcnlm", "20", "3"), ("tcnlm", "20", "4")]
    for _, _, _, tokens, wall, rate, predicted, wall_over_predicted in rows:
        assert positive(predicted) == pytest.approx(positive(tokens) / positive(rate),
                                                    rel=0.01, abs=0.01)
        assert positive(wall_over_predicted) == pytest.approx(
            positive(wall) / positive(predicted), rel=0.02, abs=0.002)
    tokens = [positive(r[3]) for r in rows[:3]]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    lines = out.splitlines()
    start = lines.index("slopes (least-squares lines):")
    slopes = [line for line in lines[start + 1:] if line.startswith("  ")]
    assert len(slopes) == 3
    for line in slopes:
        value = float(line.split(": ")[1].split(" s per ")[0])
        assert math.isfinite(value)
        assert "largest / smallest epoch time" in line


def test_models_table_float32_beside_mixed_bfloat16(capsys, tmp_path):
    """Every chosen row under both precisions in one table: tokens/s per precision, its ratio
    to the LSTM's under the same precision (1.00x for the LSTM itself) and the bfloat16 /
    float32 speed-up, each equal to the ratio of the printed rates."""
    main(["--sections", "models", "--dataset", "synthetic", "--models", "lstm,tcnlm,lstm-mos",
          "--precisions", "float32,mixed_bfloat16", "--num-topics", "4", "--model-batches", "1",
          "--cache-dir", str(tmp_path), *TINY_SYNTHETIC, *QUICK])
    out = capsys.readouterr().out
    rows = {row[0]: row for row in table(out, "model")}
    assert list(rows) == ["lstm", "lstm-mos", "tcnlm"]     # the flag's choices' order
    for name, (_, size, _, _, _, rate32, x32, _, rate16, x16, speedup) in rows.items():
        lstm32, lstm16 = positive(rows["lstm"][5]), positive(rows["lstm"][8])
        assert positive(x32) == pytest.approx(positive(rate32) / lstm32, abs=0.01)
        assert positive(x16) == pytest.approx(positive(rate16) / lstm16, abs=0.01)
        assert positive(speedup) == pytest.approx(positive(rate16) / positive(rate32),
                                                  abs=0.01)
    assert rows["lstm"][6] == rows["lstm"][9] == "1.00x"
    assert rows["lstm-mos"][1] == "1x600, mos"
