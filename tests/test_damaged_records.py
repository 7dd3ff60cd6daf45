"""A run's or a record's JSON file damaged: ``metrics.json`` truncated, random bytes or a JSON
list, ``compare.json`` or ``ablations.json`` not JSON, a record whose test perplexity is a
string, a run's ``tensorboard/`` deleted. Every reader (``train.run --resume``,
``train.status``, ``evaluate.scalars``, ``evaluate.record``, ``evaluate.compare``,
``evaluate.topic_counts``) ends in one line naming the file, or says so in its table, and
leaves the file as it was; a deleted ``metrics.json`` resumes with a notice."""
from __future__ import annotations

import json
import shutil

import pytest

from evaluate import compare, record, scalars, topic_counts
from tcnlm_tf.config import RunConfig
from tcnlm_tf.errors import UserError
from tests.conftest import TINY_EPOCH, run_flags
from tests.test_status import make_run
from tests.test_topic_counts import write_records
from train import status

METRICS = {"epochs": [{"epoch": 1, "step": 4, "valid_perplexity": 90.0,
                       "learning_rate": 1e-3, "seconds": 60.0}],
           "test_perplexity": 88.0, "stopped": "epochs"}
#: ways to damage a JSON file: name -> (bytes written, what the one line says)
DAMAGE = {
    "truncated": (json.dumps(METRICS).encode()[:25], "cannot read"),
    "random bytes": (b"\x8fPK\x03\x04\xff\xfe" + bytes(range(128, 192)), "cannot read"),
    "a list": (b"[1, 2]\n", "holds no JSON object (but a JSON array)"),
}


def one_line_error(capsys, call, *fragments):
    """Runs ``call`` (a command's ``main``), which must exit 2 with one ``error:`` line
    holding every fragment; returns that line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        call()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in err[0], (fragment, err[0])
    return err[0]


def damaged(path, case):
    """Writes the damage ``case`` into ``path``; returns the bytes written."""
    path.write_bytes(DAMAGE[case][0])
    return DAMAGE[case][0]


@pytest.mark.parametrize("case", list(DAMAGE))
def test_status_names_an_unreadable_metrics_file(tmp_path, capsys, case):
    run = make_run(tmp_path / "runs" / "cmp", [(90.0, 1e-3)], checkpoint=12)
    damaged(run / "metrics.json", case)
    rows = status.main(["--runs-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert rows[0]["state"] == "to resume (metrics.json unreadable)"
    line = [line for line in out.splitlines() if line.startswith("cmp: ")]
    assert len(line) == 1 and str(run / "metrics.json") in line[0], out
    assert DAMAGE[case][1] in line[0] and "restore it" in line[0]


@pytest.mark.parametrize("case", list(DAMAGE))
def test_scalars_names_a_damaged_metrics_file(tmp_path, capsys, case):
    written = damaged(tmp_path / "metrics.json", case)
    one_line_error(capsys, lambda: scalars.main(["--run", str(tmp_path), "--tag", "t"]),
                   str(tmp_path / "metrics.json"), DAMAGE[case][1], "restore it")
    assert (tmp_path / "metrics.json").read_bytes() == written


def test_scalars_without_its_tensorboard_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text(json.dumps(METRICS))
    one_line_error(capsys, lambda: scalars.main(["--run", str(tmp_path), "--tag", "t"]),
                   f"{tmp_path / 'tensorboard'} is gone")


def finished_run(path):
    """A run directory with a configuration and a finished metrics.json."""
    path.mkdir(parents=True)
    RunConfig().save(path / "config.json")
    (path / "metrics.json").write_text(json.dumps(METRICS))
    return path


@pytest.mark.parametrize("case", list(DAMAGE))
def test_record_names_a_damaged_metrics_file(tmp_path, capsys, case):
    run = finished_run(tmp_path / "runs" / "lstm")
    written = damaged(run / "metrics.json", case)
    one_line_error(capsys, lambda: record.main(["--run", str(run), "--record-dir",
                                                str(tmp_path / "records")]),
                   str(run / "metrics.json"), DAMAGE[case][1])
    assert (run / "metrics.json").read_bytes() == written


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_ablations_file_is_named_with_what_to_do(tmp_path, case):
    run = finished_run(tmp_path / "runs" / "tcnlm")
    written = damaged(run / "ablations.json", case)
    for read in (lambda: compare.write_record(tmp_path / "records", run, METRICS),
                 lambda: compare.ablation_evaluations(run)):
        with pytest.raises(UserError, match="ablations.json") as error:
            read()
        assert DAMAGE[case][1] in str(error.value) and "evaluates the ablations again" in \
            str(error.value)
    assert (run / "ablations.json").read_bytes() == written
    assert not (tmp_path / "records" / "tcnlm" / "metrics.json").exists()


@pytest.mark.parametrize("case", list(DAMAGE))
def test_compare_names_a_damaged_settings_file_and_keeps_it(tmp_path, case):
    written = damaged(tmp_path / "compare.json", case)
    with pytest.raises(UserError, match="compare.json") as error:
        compare.check_settings(tmp_path, {"dataset": "synthetic", "max_epochs": 1})
    assert DAMAGE[case][1] in str(error.value) and "restore it" in str(error.value)
    assert (tmp_path / "compare.json").read_bytes() == written


@pytest.mark.parametrize("case", list(DAMAGE))
def test_compare_names_a_damaged_row_record(tmp_path, case):
    row = finished_run(tmp_path / "records" / "lstm")
    damaged(row / "metrics.json", case)
    with pytest.raises(UserError, match="metrics.json") as error:
        compare.finished(row)
    assert str(row / "metrics.json") in str(error.value) and DAMAGE[case][1] in \
        str(error.value)


def test_topic_counts_refuses_a_test_perplexity_that_is_no_number(tmp_path, capsys):
    records = write_records(tmp_path / "t50", {"tcnlm": (50, 0.1, 73.8, None)}, 50)
    metrics = json.loads((records / "tcnlm" / "metrics.json").read_text())
    (records / "tcnlm" / "metrics.json").write_text(json.dumps({**metrics,
                                                                "test_perplexity": "low"}))
    one_line_error(capsys, lambda: topic_counts.main(["--records", str(records)]),
                   str(records / "tcnlm" / "metrics.json"), "'low', not a number")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from train.run import main as train

    workdir = tmp_path_factory.mktemp("damaged-records")
    train(TINY_EPOCH + run_flags(workdir, "good"))
    return workdir


def resume(trained, name):
    """``train.run --resume`` of a copy of the trained run, as ``name``."""
    from train.run import main as train

    shutil.copytree(trained / "runs" / "good", trained / "runs" / name)
    return lambda: train(TINY_EPOCH + run_flags(trained, name) + ["--resume"])


@pytest.mark.slow
@pytest.mark.parametrize("case", list(DAMAGE))
def test_resume_names_a_damaged_metrics_file(trained, capsys, case):
    again = resume(trained, f"resume-{case.replace(' ', '-')}")
    metrics = trained / "runs" / f"resume-{case.replace(' ', '-')}" / "metrics.json"
    written = damaged(metrics, case)
    one_line_error(capsys, again, str(metrics), DAMAGE[case][1], "the checkpoints are intact")
    assert metrics.read_bytes() == written


@pytest.mark.slow
def test_resume_without_metrics_says_the_history_is_lost(trained, capsys):
    again = resume(trained, "resume-deleted")
    metrics = trained / "runs" / "resume-deleted" / "metrics.json"
    metrics.unlink()
    capsys.readouterr()
    again()
    out = capsys.readouterr().out
    assert f"note: {metrics} is gone: the history of the run's 1 finished epoch is lost" in out
    assert "test_perplexity" in json.loads(metrics.read_text())
