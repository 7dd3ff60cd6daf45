"""benchmarks.profile_bf16_step on both peers workloads shrunk by --train-flags: each
category table sums to its profiled step, the floor and the speed-ups follow from the
printed figures; the categories of the ops a step runs; bad flags as one line."""
from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import profile_bf16_step as probe
from tests.conftest import REPO_ROOT
from tests.test_benchmark import positive, table

TINY = "--hidden-size 16 --embedding-dim 16 --batch-size 4 --seq-len 6"
WORKLOADS = ("pd-tied-medium", "apnews-small-adaptive")


def test_each_category_table_sums_to_its_step_and_the_floor_follows():
    command = [sys.executable, "-m", "benchmarks.profile_bf16_step", "--workloads",
               ",".join(WORKLOADS), "--steps", "2", "--rounds", "1", "--warmup", "1",
               "--batches", "1", "--top", "4", "--matmul-size", "64", f"--train-flags={TINY}"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.startswith("machine: ")
    assert out.rstrip().splitlines()[-1].startswith(
        "command: python -m benchmarks.profile_bf16_step --workloads")
    for name in WORKLOADS:
        part = out[out.index(f"\n{name}: "):]
        rows = {row[0]: row[1:] for row in table(part, "category")}
        assert list(rows) == [*probe.CATEGORIES, probe.OUTSIDE, "step"]
        for column in (0, 1):
            ms = {c: float(cells[column]) for c, cells in rows.items()}
            assert sum(ms[c] for c in (*probe.CATEGORIES, probe.OUTSIDE)) == pytest.approx(
                ms["step"], abs=0.07)
            assert ms["matmul"] > 0 and ms[probe.OUTSIDE] >= -0.01   # no op counted twice
            assert ms[probe.OUTSIDE] < ms["step"]
        assert float(rows["cast"][1]) > 0                          # bfloat16 casts
        f32, bf16 = positive(rows["step"][0]), positive(rows["step"][1])
        assert positive(rows["step"][2]) == pytest.approx(f32 / bf16, abs=0.006)
        for precision in probe.PRECISIONS:
            top = table(part[part.index(f"{name}, {precision}: the 4 slowest"):], "op type")
            assert 1 <= len(top) <= 4 and all(row[1] in probe.CATEGORIES for row in top)
            times = [positive(row[2]) for row in top]
            assert times == sorted(times, reverse=True)
        product = next(line for line in part.splitlines()
                       if line.startswith(f"{name}: one [64, 64] product, float32 "))
        product32, product16 = (positive(product.split()[i]) for i in (6, 10))
        speed_up = positive(product.split(" = ")[-1].removesuffix("x"))
        # the times are printed to 4 significant digits (their ratio to 1e-3 of itself), the
        # speed-up to 0.005
        ratio = product32 / product16
        assert speed_up == pytest.approx(ratio, abs=0.0051 + 1e-3 * ratio)
        floor_line = next(line for line in part.splitlines()
                          if line.startswith(f"{name}: floor = "))
        assert f"/ {speed_up:.2f} = " in floor_line
        low = (bf16 - float(rows["cast"][1]) - float(rows["matmul"][1])
               + float(rows["matmul"][0]) / speed_up)
        # the printed terms are rounded to 0.005, the speed-up too, and the float32 products'
        # time is divided by it: so much the printed floor may differ from ``low``
        rounding = 0.005 * (4 + float(rows["matmul"][0]) / speed_up ** 2)
        floor = positive(floor_line.split(" = ")[-1].removesuffix(" ms"))
        assert floor == pytest.approx(low, abs=rounding + 0.001)
        speed_line = next(line for line in part.splitlines()
                          if line.startswith(f"{name}: largest bf16 speed-up "))
        # both times printed to 0.005 ms, the speed-up too
        largest = f32 / floor
        assert positive(speed_line.split()[4]) == pytest.approx(
            largest, abs=0.0051 + largest * 0.005 * (1 / f32 + 1 / floor))
        assert "measured " in speed_line and "no profiler" in speed_line


@pytest.mark.parametrize("kind, name, expected", [
    ("_MklNativeFusedMatMul", "lstm_lm_1/add_1", "matmul"),
    ("_MklMatMul", "gradient_tape/lstm_lm_1/MatMul_2/MatMul_1", "matmul"),
    ("Cast", "lstm_lm_1/Cast_3", "cast"),
    ("Mul", "adam_1/update_0_7/mul", "optimizer update"),
    ("AssignAddVariableOp", "adam/update_0/AssignAddVariableOp_1", "optimizer update"),
    ("Mul", "madam/mul", "element-wise"),
    ("L2Loss", "global_norm/L2Loss_2", "gradient clipping"),
    ("Mul", "gradient_tape/lstm_lm_1/SparseSoftmaxCrossEntropyWithLogits_1/mul",
     "softmax, cross-entropy"),
    ("SelectV2", "gradient_tape/lstm_lm_1/dropout_1_2/stateless_dropout/SelectV2", "dropout"),
    ("Mul", "while/body/_86/while/mul", "element-wise"),
    ("TensorListFromTensor", "TensorArrayUnstack/TensorListFromTensor",
     "TensorList, TensorArray"),
    ("BiasAddGrad", "gradient_tape/lstm_lm_1/lstm_0_1/BiasAdd/BiasAddGrad", "reductions"),
    ("Split", "while/body/_86/while/split", "data movement"),
    ("NoSuchOp", "x", "other ops"),
])
def test_the_categories_of_a_steps_ops(kind, name, expected):
    assert probe.category(kind, name, probe.optimiser_scope("adam")) == expected


@pytest.mark.parametrize("flags, message", [
    (["--workloads", "pd,x"], "error: --workloads 'pd,x': unknown pd, x"),
    (["--matmul-speed-up", "0"], "error: --matmul-speed-up must be above 0"),
    (["--train-flags=--preset huge"], "error: --train-flags '--preset huge': "),
    (["--steps", "0"], "error: argument --steps"),
])
def test_bad_flags_are_one_line(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        probe.main(flags)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
