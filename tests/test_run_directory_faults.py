"""A run directory deleted, moved or replaced while its training runs: one line, exit status
2 and nothing more written (tcnlm_tf.runs.directory.RunDirectoryWatch), never a reported
success in a directory without config.json and vocabularies, nor a traceback. And what saves
cut short leave in checkpoints/ and best/: removed, or listed again so that pruning counts
it, when a training starts or resumes (tcnlm_tf.runs.checkpoints.tidy_checkpoints)."""
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.runs.checkpoints import checkpoint_paths, quiet_pruning, tidy_checkpoints
from tcnlm_tf.runs.directory import (RESUME_STATE, RunDirectory, RunDirectoryGone,
                                     RunDirectoryWatch)
from tcnlm_tf.runs.lock import held_lock, try_lock
from tests.conftest import REPO_ROOT, TINY, TINY_EPOCH, run_flags
from tests.test_cli import assert_one_line_error
from train.run import main

#: what the tiny checkpoints of these tests hold
WEIGHTS = 1000


# ------------------------------------------------------------ the run directory's watch
def test_the_watch_sees_the_directory_deleted_made_again_or_replaced(tmp_path):
    run = tmp_path / "runs" / "x"
    lock = try_lock(run)
    try:
        (run / "config.json").write_text("{}\n")
        watch = RunDirectoryWatch(lock)
        watch.check()                                   # untouched: nothing to say
        assert not watch.made_again()
        shutil.rmtree(run)
        with pytest.raises(RunDirectoryGone) as gone:
            watch.check()
        assert str(gone.value) == (f"run directory {run} was deleted or moved while training "
                                   "(the directory is gone); nothing more is written: start "
                                   "the run again")
        (run / "checkpoints").mkdir(parents=True)       # what a save makes again
        with pytest.raises(RunDirectoryGone, match=r"deleted or moved .*\(config.json is gone\)"):
            watch.check()
        assert watch.made_again()
        other = try_lock(run)                           # another training took the name
        assert other is not None
        with pytest.raises(RunDirectoryGone, match=r"replaced .*\(its .lock is another process"):
            watch.check()
        other.release()
    finally:
        lock.release()


def test_the_watch_follows_a_linked_runs_dir(tmp_path):
    """A --runs-dir that is a symlink: the lock is found by either path, and the watch of a
    directory untouched says nothing; its deletion through the real path is seen."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    lock = try_lock(tmp_path / "link" / "x")
    try:
        assert held_lock(real / "x") is lock and held_lock(tmp_path / "link" / "x") is lock
        (real / "x" / "config.json").write_text("{}\n")
        watch = RunDirectoryWatch(lock)
        watch.check()
        shutil.rmtree(real / "x")
        with pytest.raises(RunDirectoryGone, match="the directory is gone"):
            watch.check()
    finally:
        lock.release()
    assert held_lock(real / "x") is None


@pytest.mark.slow
def test_a_deleted_run_directory_stops_training_in_one_line(tmp_path):
    """The report's case: `rm -rf` of the run directory at a random point after training
    began (0.3-2.6 s after its config.json appeared). The training stops with the one line
    naming the directory, exit status 2, and writes nothing more: the directory does not
    appear again (with best/, checkpoints/ or metrics.json)."""
    run = tmp_path / "runs" / "x"
    process = subprocess.Popen(
        [sys.executable, "-m", "train.run", *TINY_EPOCH, "--epochs", "30",
         "--checkpoint-minutes", "0", *run_flags(tmp_path, "x")], cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    deadline = time.monotonic() + 240
    while not (run / "config.json").is_file():
        assert process.poll() is None and time.monotonic() < deadline, "no config.json came"
        time.sleep(0.02)
    time.sleep(random.uniform(0.3, 2.6))
    for _ in range(10):         # as `rm -rf` again where a write raced with the first one
        shutil.rmtree(run, ignore_errors=True)
        if not run.exists():
            break
    _, stderr = process.communicate(timeout=600)
    assert_one_line_error(subprocess.CompletedProcess([], process.returncode, "", stderr),
                          f"run directory {run} was deleted or moved while training",
                          "nothing more is written")
    assert not run.exists(), sorted(p.name for p in run.rglob("*"))


def delete_run_after(count: int, run: Path, during: bool):
    """A ``CheckpointManager.save`` that deletes ``run`` at its ``count``-th call: after the
    save (``during`` False), or before it, so that the save makes the run directory and its
    folder again (as a deletion in the middle of a save does)."""
    save = tf.train.CheckpointManager.save
    calls = []

    def deleting(self, *args, **kwargs):
        calls.append(1)
        if during and len(calls) == count:
            shutil.rmtree(run)
        result = save(self, *args, **kwargs)
        if not during and len(calls) == count:
            shutil.rmtree(run)
        return result
    return deleting


@pytest.mark.slow
def test_a_run_directory_deleted_before_its_tensorboard_writer_is_made_is_one_line(
        tmp_path, monkeypatch, capsys):
    """The deletion in the moment between the trainer's last check and the making of its
    TensorBoard writer, which makes its folder (and an events file) again: the one line,
    and what the writer made is removed with the directory."""
    run = tmp_path / "runs" / "x"
    create = tf.summary.create_file_writer

    def deleting(logdir, *args, **kwargs):
        if Path(logdir) == run / "tensorboard":
            shutil.rmtree(run)
        return create(logdir, *args, **kwargs)
    monkeypatch.setattr(tf.summary, "create_file_writer", deleting)
    with pytest.raises(SystemExit) as stop:
        main(TINY_EPOCH + ["--epochs", "1"] + run_flags(tmp_path, "x"))
    assert stop.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (f"error: run directory {run} was deleted or moved while training (config.json "
                    "is gone); nothing more is written: start the run again")
    assert not run.exists(), sorted(p.name for p in run.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("during", [False, True], ids=["after-a-save", "during-a-save"])
def test_a_run_directory_deleted_around_a_checkpoint_is_one_line(tmp_path, monkeypatch, capsys,
                                                                 during):
    run = tmp_path / "runs" / "x"
    monkeypatch.setattr(tf.train.CheckpointManager, "save", delete_run_after(2, run, during))
    with pytest.raises(SystemExit) as stop:
        main(TINY_EPOCH + ["--epochs", "3"] + run_flags(tmp_path, "x"))
    assert stop.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    sign = "config.json is gone" if during else "the directory is gone"
    assert line == (f"error: run directory {run} was deleted or moved while training ({sign}); "
                    "nothing more is written: start the run again")
    assert not run.exists(), sorted(p.name for p in run.rglob("*"))   # not even made again


@pytest.mark.slow
def test_a_run_directory_deleted_while_pruning_is_one_line(tmp_path, monkeypatch, capsys):
    """The run directory deleted between the listing of the resume-state files to prune
    and their removal: the same one line, not a FileNotFoundError."""
    run = tmp_path / "runs" / "x"
    listing = RunDirectory.resume_states

    def deleted_meanwhile(self):
        found = listing(self)
        if len(found) > 2:                  # one to remove: --keep-checkpoints 2
            shutil.rmtree(run)
        return found
    monkeypatch.setattr(RunDirectory, "resume_states", deleted_meanwhile)
    with pytest.raises(SystemExit) as stop:
        main(TINY_EPOCH + ["--epochs", "3", "--keep-checkpoints", "2"] + run_flags(tmp_path, "x"))
    assert stop.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: run directory {run} was deleted or moved while training")


@pytest.mark.slow
def test_runs_through_a_linked_runs_dir_train_and_resume(tmp_path, capsys):
    """No false alarm: a --runs-dir reached through a symlink trains, and resumes."""
    (tmp_path / "real").mkdir()
    (tmp_path / "runs").symlink_to(tmp_path / "real")
    main(TINY + run_flags(tmp_path, "linked"))
    metrics = main(TINY + ["--max-steps", "5", "--resume"] + run_flags(tmp_path, "linked"))
    assert metrics["steps"] == 5
    assert "error" not in capsys.readouterr().err
    assert held_lock(tmp_path / "runs" / "linked") is None      # released at the end


# ---------------------------------------------------------- what saves cut short leave
def saved_folder(directory: Path, steps: list[int], keep: int = 2) -> tf.train.Checkpoint:
    """A folder of checkpoints of one variable (its value: the step) saved at ``steps``
    by a manager that keeps ``keep``, with a ``resume-state-<step>.npz`` beside each."""
    variable = tf.Variable(np.zeros(WEIGHTS, np.float32))
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=keep)
    for step in steps:
        variable.assign(np.full(WEIGHTS, step, np.float32))
        manager.save(checkpoint_number=step)
        (directory / f"resume-state-{step}.npz").write_bytes(b"state")
    return checkpoint


def orphan(directory: Path, step: int) -> None:
    """Drop ``ckpt-<step>`` from the state file, as a save stopped after writing its files
    and before recording them leaves it."""
    state = (directory / "checkpoint").read_text().splitlines()
    names = [line for line in state if "_paths:" in line and f'"ckpt-{step}"' not in line]
    newest = names[-1].split(": ", 1)[1]
    (directory / "checkpoint").write_text("\n".join(
        [f"model_checkpoint_path: {newest}"] + names) + "\n")


def names(directory: Path) -> list[str]:
    return [Path(prefix).name for prefix in checkpoint_paths(directory)]


def test_leftovers_of_cut_short_saves_are_removed_with_one_notice(tmp_path):
    directory = tmp_path / "checkpoints"
    saved_folder(directory, [1, 2, 3])                  # keeps ckpt-2 and ckpt-3
    leftovers = ["ckpt-4_temp", "checkpoint.tmp5d1f0c2e9a7b4c3d8e6f1a2b3c4d5e6f",
                 ".resume-state-4.npz.12345.tmp", "ckpt-3.index.tempstate1234567890",
                 "ckpt-1.data-00000-of-00001", "resume-state-1.npz", "resume-state-4.npz"]
    (directory / "ckpt-4_temp").mkdir()
    (directory / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate99").write_bytes(
        b"half")
    for name in leftovers[1:]:
        (directory / name).write_bytes(b"left")
    before = {p.name for p in directory.iterdir()}
    notices = []
    tidy_checkpoints(directory, notices.append, companions=RESUME_STATE)
    assert {p.name for p in directory.iterdir()} == before - set(leftovers)
    assert len(notices) == 1 and str(directory) in notices[0]
    assert all(name in notices[0] for name in leftovers) and "ckpt-4_temp/," in notices[0]
    assert names(directory) == ["ckpt-3", "ckpt-2"]
    tidy_checkpoints(directory, notices.append, companions=RESUME_STATE)
    assert len(notices) == 1                            # nothing more to say


def test_an_orphan_checkpoint_is_listed_again_and_counts_for_pruning(tmp_path):
    """A save cut short after its files and before the state file (ckpt-4 here): kept and
    listed as the newest, since it may be the newest good one, which --resume restores;
    the manager's next save then prunes to --keep-checkpoints counting it."""
    directory = tmp_path / "checkpoints"
    saved_folder(directory, [2, 3, 4], keep=3)
    orphan(directory, 4)
    assert names(directory) == ["ckpt-3", "ckpt-2"]
    notices = []
    tidy_checkpoints(directory, notices.append)
    assert names(directory) == ["ckpt-4", "ckpt-3", "ckpt-2"]
    assert len(notices) == 1 and "listed ckpt-4 again" in notices[0]
    restored = tf.train.Checkpoint(v=tf.Variable(np.zeros(WEIGHTS, np.float32)))
    restored.restore(checkpoint_paths(directory)[0]).assert_consumed()
    assert np.all(restored.v.numpy() == 4)
    manager = tf.train.CheckpointManager(restored, directory, max_to_keep=2)
    manager.save(checkpoint_number=5)
    assert sorted(p.name for p in directory.glob("*.index")) == ["ckpt-4.index", "ckpt-5.index"]


def test_checkpoints_a_lost_state_file_left_out_are_pruned(tmp_path):
    """The state file deleted: --resume finds the numbered files, and the manager's new
    list would leave them on disk for good; listed again, they are pruned like others."""
    directory = tmp_path / "checkpoints"
    saved_folder(directory, [1, 2, 3], keep=3)
    (directory / "checkpoint").unlink()
    tidy_checkpoints(directory, lambda line: None)
    assert names(directory) == ["ckpt-3", "ckpt-2", "ckpt-1"]
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(
        np.zeros(WEIGHTS, np.float32))), directory, max_to_keep=1)
    manager.save(checkpoint_number=4)
    assert [p.name for p in directory.glob("*.index")] == ["ckpt-4.index"]


def test_a_state_file_listing_only_missing_checkpoints_is_kept(tmp_path):
    """No complete checkpoint at all: the state file stays as it is (restoring then names
    the missing checkpoint), never an empty list that makes --resume start over."""
    directory = tmp_path / "checkpoints"
    saved_folder(directory, [1], keep=1)
    state = (directory / "checkpoint").read_text()
    (directory / "ckpt-1.index").unlink()
    tidy_checkpoints(directory, lambda line: None)
    assert (directory / "checkpoint").read_text() == state


def test_a_file_pruned_already_is_no_warning(tmp_path, monkeypatch, caplog):
    """A file the manager prunes deleted meanwhile (a run directory removed under it):
    TensorFlow's warning is left out, so the one-line error stays the only line."""
    from tensorflow.python.lib.io import file_io
    directory = tmp_path / "checkpoints"
    checkpoint = saved_folder(directory, [1], keep=1)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=1)
    matching = file_io.get_matching_files
    monkeypatch.setattr(file_io, "get_matching_files",
                        lambda pattern: matching(pattern) + [str(directory / "gone")])
    with caplog.at_level(logging.WARNING, logger="tensorflow"), quiet_pruning():
        manager.save(checkpoint_number=2)
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        manager.save(checkpoint_number=3)
    assert "Hit NotFoundError" in caplog.text          # outside the block, as TensorFlow has it


@pytest.fixture
def orphaned_run(tmp_path):
    """A tiny run trained 2 then 4 steps whose state file lost ckpt-4 (a save cut short
    before recording it), with the leftovers of another save cut short in checkpoints/
    and best/: (flags, its checkpoints folder)."""
    flags = TINY + run_flags(tmp_path, "run") + ["--keep-checkpoints", "2"]
    main(flags + ["--max-steps", "2"])
    main(flags + ["--max-steps", "4", "--resume"])
    run = tmp_path / "runs" / "run"
    orphan(run / "checkpoints", 4)
    for folder in ("checkpoints", "best"):
        (run / folder).mkdir(exist_ok=True)
        (run / folder / "ckpt-9_temp").mkdir()
        (run / folder / "checkpoint.tmp0123456789abcdef0123456789abcdef").write_text("x")
    (run / "checkpoints" / ".resume-state-9.npz.4242.tmp").write_bytes(b"half")
    return flags, run / "checkpoints"


@pytest.mark.slow
def test_resume_tidies_and_restores_the_orphan_checkpoint(orphaned_run, capsys):
    flags, checkpoints = orphaned_run
    metrics = main(flags + ["--max-steps", "5", "--resume"])
    out = capsys.readouterr().out
    tidied = [line for line in out.splitlines() if line.startswith("note: tidied")]
    assert len(tidied) == 2, out                        # one line for each folder
    assert all("ckpt-9_temp" in line and "checkpoint.tmp" in line for line in tidied)
    assert ".resume-state-9.npz.4242.tmp" in tidied[0] and "listed ckpt-4 again" in tidied[0]
    assert "resumed from" in out and "step 4" in out    # the newest good checkpoint
    assert "no resume-state" not in out
    assert metrics["steps"] == 5
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "checkpoint", "ckpt-4.data-00000-of-00001", "ckpt-4.index",
        "ckpt-5.data-00000-of-00001", "ckpt-5.index", "resume-state-4.npz",
        "resume-state-5.npz"]
    assert not [p for p in (checkpoints.parent / "best").iterdir() if "tmp" in p.name
                or p.name.endswith("_temp")]
