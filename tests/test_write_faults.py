"""Where the run goes: an unusable --runs-dir, a full disk while writing a checkpoint or
metrics.json, each one line naming the path, with no partial file a later resume would
trust."""
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tcnlm_tf.data import corpus as corpus_module
from tcnlm_tf.runs.checkpoints import checkpoint_paths
from tests.conftest import REPO_ROOT, TINY, TINY_EPOCH, run_flags
from tests.test_cli import assert_one_line_error
from train.run import main

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


def test_a_runs_dir_that_is_a_file_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    result = subprocess.run([sys.executable, "-m", "train.run", *TINY, "--runs-dir",
                             str(blocker), "--cache-dir", str(tmp_path / "cache")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert_one_line_error(result, "cannot write", str(blocker))


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "metrics.json")


def test_a_full_disk_writing_metrics_leaves_the_old_file(tmp_path, monkeypatch, capsys):
    flags = TINY + run_flags(tmp_path, "full") + ["--max-steps", "2"]
    main(flags)
    metrics = tmp_path / "runs" / "full" / "metrics.json"
    before = metrics.read_bytes()
    monkeypatch.setattr(corpus_module.os, "fsync", full_disk)
    with pytest.raises(SystemExit) as stop:
        main(flags[:-1] + ["3", "--resume"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "metrics.json" in err[0]
    assert metrics.read_bytes() == before                      # not half written
    assert not [p for p in metrics.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_writing_a_checkpoint_keeps_the_last_complete_one(tmp_path, monkeypatch,
                                                                     capsys):
    flags = TINY + run_flags(tmp_path, "ckpt") + ["--max-steps", "2"]
    main(flags)
    directory = tmp_path / "runs" / "ckpt" / "checkpoints"
    before = checkpoint_paths(directory)
    newest = Path(before[0])
    torn = newest.with_name("ckpt-999")

    def no_space(self, *args, **kwargs):
        """What a disk that fills while a checkpoint is written leaves behind: a newer
        checkpoint's index and half of its data file."""
        shutil.copy(newest.with_suffix(".index"), torn.with_suffix(".index"))
        [data] = newest.parent.glob(newest.name + ".data-*")
        whole = data.read_bytes()
        torn.with_name(data.name.replace(newest.name, torn.name)).write_bytes(
            whole[:len(whole) // 2])
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(tf.train.CheckpointManager, "save", no_space)
        with pytest.raises(SystemExit) as stop:
            main(flags[:-1] + ["4", "--resume"])
    assert stop.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "could not write a checkpoint" in line and str(directory) in line
    assert "No space left on device" in line and "--resume" in line
    assert torn.with_suffix(".index").is_file()
    assert checkpoint_paths(directory) == before
    main(flags[:-1] + ["4", "--resume"])                 # the disk has room again
    assert f"resumed from {newest}:" in capsys.readouterr().out


def test_a_full_disk_writing_tensorboard_events_is_one_line(tmp_path, monkeypatch, capsys):
    writer_class = type(tf.summary.create_file_writer(str(tmp_path / "probe")))

    def no_space(self):
        raise tf.errors.ResourceExhaustedError(None, None, "events file: No space left on device")

    monkeypatch.setattr(writer_class, "flush", no_space)
    with pytest.raises(SystemExit) as stop:
        main(TINY_EPOCH + run_flags(tmp_path, "events"))
    assert stop.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "No space left on device" in line and str(tmp_path / "runs" / "events") in line
    assert "--resume" in line
