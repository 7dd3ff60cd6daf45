"""A run's or a record's JSON file damaged: ``metrics.json`` truncated, random bytes or a JSON
list (also between two writes of a training), ``config.json``, ``compare.json`` or
``ablations.json`` not JSON, a record whose test perplexity is a string, a run's
``tensorboard/`` deleted or an event file in it damaged. Every reader (``train.run``,
``train.status``, ``evaluate.scalars``, ``evaluate.record``, ``evaluate.compare``,
``evaluate.topic_counts``) ends in one line naming the file, or says so in its table, and
leaves the file as it was; a deleted ``metrics.json`` resumes with a notice, and an event file
cut short inside its last record (a kill mid-write) is read up to the cut with a warning."""
from __future__ import annotations

import contextlib
import json
import random
import shutil
import types

import pytest

from evaluate import compare, record, scalars, topic_counts
from tcnlm_tf.config import RunConfig
from tcnlm_tf.errors import UserError
from tcnlm_tf.runs.directory import RunDirectory
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


def logged_run(path):
    """A run directory whose metrics.json ends epochs at steps 4 and 8 and whose one event
    file logs ``train/loss`` = step at steps 1 to 8 (epoch means 2.5 and 6.5); returns the
    event file."""
    import tensorflow as tf

    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.json").write_text(json.dumps(
        {"epochs": [{**METRICS["epochs"][0], "epoch": epoch, "step": step}
                    for epoch, step in ((1, 4), (2, 8))]}))
    writer = tf.summary.create_file_writer(str(path / "tensorboard"))
    with writer.as_default():
        for step in range(1, 9):
            tf.summary.scalar("train/loss", float(step), step=step)
    writer.close()
    return next((path / "tensorboard").glob("events.out.tfevents.*"))


def inverted_middle(data):
    """``data`` with 16 bytes in its middle inverted, as bit rot does."""
    middle = len(data) // 2 - 8
    return data[:middle] + bytes(255 - b for b in data[middle:middle + 16]) + data[middle + 16:]


def loss_means(run, capsys):
    """``evaluate.scalars --tag train/loss`` of ``run``: its means and its stderr lines."""
    capsys.readouterr()
    means = scalars.main(["--run", str(run), "--tag", "train/loss"])
    return means, capsys.readouterr().err.strip().splitlines()


def test_scalars_of_whole_event_files_say_nothing_more(tmp_path, capsys):
    logged_run(tmp_path)
    assert loss_means(tmp_path, capsys) == ([2.5, 6.5], [])


@pytest.mark.parametrize("damage", [inverted_middle, lambda data: random.Random(3).randbytes(
    len(data))], ids=["bit rot in the middle", "random bytes"])
def test_scalars_names_a_damaged_event_file_and_keeps_it(tmp_path, capsys, damage):
    events = logged_run(tmp_path)
    events.write_bytes(damage(events.read_bytes()))
    written = events.read_bytes()
    one_line_error(capsys, lambda: scalars.main(["--run", str(tmp_path), "--tag", "train/loss"]),
                   f"{events} is damaged", "fails its checksum", "restore it from a copy")
    assert events.read_bytes() == written


def test_scalars_reads_an_event_file_cut_short_up_to_the_cut_and_says_so(tmp_path, capsys):
    events = logged_run(tmp_path)
    events.write_bytes(events.read_bytes()[:-5])      # a kill mid-write: the last record torn
    means, err = loss_means(tmp_path, capsys)
    assert means == [2.5, 6.0]
    assert len(err) == 1 and err[0].startswith(f"warning: {events} ends in a record cut "
                                               "short"), err
    assert "its steps up to 7 are read" in err[0]


def test_scalars_names_an_event_file_that_links_to_nothing(tmp_path, capsys):
    logged_run(tmp_path)
    gone = tmp_path / "tensorboard" / "events.out.tfevents.2.moved"
    gone.symlink_to(tmp_path / "elsewhere" / "events.out.tfevents.2")
    one_line_error(capsys, lambda: scalars.main(["--run", str(tmp_path), "--tag", "train/loss"]),
                   f"cannot read {gone} (No such file or directory)", "restore it")


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


@pytest.mark.parametrize("case", list(DAMAGE))
def test_compare_names_a_damaged_run_configuration(tmp_path, case):
    run = finished_run(tmp_path / "runs" / "tcnlm")
    written = damaged(run / "config.json", case)
    for read in (lambda: compare.ablation_flags(run), lambda: compare.size_of(run),
                 lambda: compare.data_dir_of(run),
                 lambda: compare.write_record(tmp_path / "records", run, METRICS)):
        with pytest.raises(UserError, match="config.json") as error:
            read()
        assert f"{run / 'config.json'} is damaged" in str(error.value) and "restore it" in \
            str(error.value)
    assert (run / "config.json").read_bytes() == written
    assert not (tmp_path / "records" / "tcnlm" / "metrics.json").exists()


@pytest.mark.parametrize("case", list(DAMAGE))
def test_training_names_a_metrics_file_damaged_between_its_writes(tmp_path, case):
    from train.trainer import Trainer

    written = damaged(tmp_path / "metrics.json", case)
    trainer = types.SimpleNamespace(run_files=RunDirectory(tmp_path),
                                    _writing=lambda made=None: contextlib.nullcontext())
    with pytest.raises(UserError, match="metrics.json") as error:
        Trainer.write_metrics(trainer)
    assert str(tmp_path / "metrics.json") in str(error.value) and DAMAGE[case][1] in \
        str(error.value) and "the checkpoints are intact" in str(error.value)
    assert (tmp_path / "metrics.json").read_bytes() == written


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
