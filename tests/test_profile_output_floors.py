"""benchmarks.profile_output_floors: its Topic-RNN table at tiny sizes (no data needed), and
a bad flag as one line."""
from __future__ import annotations

import pytest

from benchmarks import profile_output_floors as profile

TINY = ["--vocab-size", "50", "--batch", "2", "--time-steps", "3", "--hidden", "8",
        "--num-topics", "3", "--rounds", "1", "--warmup", "0"]


def test_topic_rnn_table_times_every_step_against_the_matmul(capsys):
    profile.main(["--sections", "topic_rnn", *TINY])
    out = capsys.readouterr().out
    lines = out[out.index("step "):].splitlines()[2:6]
    rows = {cells[0]: cells[1:] for cells in
            ([c.strip() for c in line.split("|")] for line in lines)}
    assert list(rows) == ["softmax matmul only", "softmax cross-entropy",
                          "Topic-RNN terms (now)", "Topic-RNN terms (before)"]
    assert rows["softmax matmul only"][1] == "1.00x"
    for ms, ratio in rows.values():
        assert float(ms) > 0 and float(ratio.rstrip("x")) > 0
    assert "V=50, K=3" in out
    assert "command: python -m benchmarks.profile_output_floors --sections topic_rnn" in out


def test_bad_section_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        profile.main(["--sections", "mos"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --sections 'mos'") and "\n" not in err
