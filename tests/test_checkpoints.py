"""Damaged checkpoints: a torn or corrupted newest checkpoint falls back to the newest
readable one with a notice, in --resume, the evaluators and export; none readable is a
one-line error naming the file."""
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.errors import UserError
from tcnlm_tf.runs.checkpoints import checkpoint_paths, restore_newest_readable
from tcnlm_tf.runs.directory import RunDirectory
from tcnlm_tf.runs.loading import load_run
from tests.conftest import TINY, TINY_EPOCH, run_flags
from train.run import main


def damage(prefix, how="corrupt"):
    """Overwrite the middle of a checkpoint's data file with other bytes (a corruption its
    checksums catch) or cut it in half (a torn copy)."""
    [data] = [p for p in prefix.parent.glob(prefix.name + ".data-*")]
    raw = bytearray(data.read_bytes())
    if how == "torn":
        data.write_bytes(bytes(raw[:len(raw) // 2]))
    else:
        middle = len(raw) // 2
        raw[middle:middle + 64] = bytes(255 - b for b in raw[middle:middle + 64])
        data.write_bytes(bytes(raw))


@pytest.mark.parametrize("how", ["corrupt", "torn"])
def test_the_newest_readable_checkpoint_is_restored(tmp_path, how):
    variable = tf.Variable(np.arange(1000, dtype=np.float32))
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
    for step in (1, 2):
        variable.assign(np.full(1000, step, np.float32))
        manager.save(checkpoint_number=step)
    variable.assign(np.zeros(1000, np.float32))
    newest = tmp_path / "ckpt-2"
    assert checkpoint_paths(tmp_path) == [str(newest), str(tmp_path / "ckpt-1")]
    damage(newest, how)
    notices = []
    assert restore_newest_readable(checkpoint, tmp_path, notices.append) == str(tmp_path / "ckpt-1")
    assert np.all(variable.numpy() == 1.0)
    assert len(notices) == 1 and "ckpt-2" in notices[0] and "restored ckpt-1" in notices[0]
    damage(tmp_path / "ckpt-1", how)
    with pytest.raises(UserError, match="no readable checkpoint"):
        restore_newest_readable(checkpoint, tmp_path, notices.append)


def test_a_damaged_state_file_falls_back_to_the_numbered_files(tmp_path):
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
    manager = tf.train.CheckpointManager(checkpoint, tmp_path, max_to_keep=3)
    for step in (3, 12):
        manager.save(checkpoint_number=step)
    (tmp_path / "checkpoint").write_bytes(b"\x00\xff garbage")
    assert checkpoint_paths(tmp_path) == [str(tmp_path / "ckpt-12"), str(tmp_path / "ckpt-3")]


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    """A tiny run trained 2 then 4 steps (checkpoints ckpt-2 and ckpt-4); its work dir."""
    workdir = tmp_path_factory.mktemp("two-checkpoints")
    flags = TINY + run_flags(workdir, "run")
    main(flags + ["--max-steps", "2"])
    main(flags + ["--max-steps", "4", "--resume"])
    return workdir


@pytest.fixture
def damaged_run(two_checkpoints, tmp_path):
    """A copy of ``two_checkpoints`` for one test to damage: returns (workdir, flags)."""
    workdir = tmp_path / "work"
    shutil.copytree(two_checkpoints, workdir)
    return workdir, TINY + run_flags(workdir, "run")


def test_resume_passes_over_a_damaged_newest_checkpoint(damaged_run, capsys):
    workdir, flags = damaged_run
    checkpoints = workdir / "runs" / "run" / "checkpoints"
    assert [p.split("/")[-1] for p in checkpoint_paths(checkpoints)] == ["ckpt-4", "ckpt-2"]
    damage(checkpoints / "ckpt-4")
    metrics = main(flags + ["--max-steps", "5", "--resume"])
    out = capsys.readouterr().out
    assert "skipped unreadable checkpoint(s) ckpt-4" in out and "restored ckpt-2" in out
    assert "resumed from" in out and "step 2" in out
    assert metrics["steps"] == 5


@pytest.mark.parametrize("how", ["truncated", "not an npz"])
def test_resume_passes_over_a_checkpoint_whose_resume_state_is_damaged(damaged_run, capsys,
                                                                      how):
    """A damaged resume-state-4.npz: --resume restores ckpt-2 (whose state is whole), with
    the notice naming the file, instead of a traceback on every --resume."""
    workdir, flags = damaged_run
    state = workdir / "runs" / "run" / "checkpoints" / "resume-state-4.npz"
    raw = state.read_bytes()
    state.write_bytes(raw[:len(raw) // 2] if how == "truncated"
                      else np.random.default_rng(0).bytes(len(raw)))
    metrics = main(flags + ["--max-steps", "5", "--resume"])
    out = capsys.readouterr().out
    assert "skipped unreadable checkpoint(s) ckpt-4" in out and "resume-state-4.npz" in out
    assert "restored ckpt-2" in out and "resumed from" in out and "step 2" in out
    assert "no resume-state" not in out                # ckpt-2's own state was read
    assert metrics["steps"] == 5


def test_resume_without_the_checkpoint_state_file(damaged_run, capsys):
    """The state file checkpoints/checkpoint deleted: the run still counts as one with
    checkpoints (a new run with its name goes to another directory), and --resume finds
    the newest checkpoint by its number and goes on from step 4."""
    workdir, flags = damaged_run
    (workdir / "runs" / "run" / "checkpoints" / "checkpoint").unlink()
    assert RunDirectory(workdir / "runs" / "run").has_checkpoint()
    metrics = main(flags + ["--max-steps", "5", "--resume"])
    out = capsys.readouterr().out
    assert "resumed from" in out and "step 4" in out
    assert metrics["steps"] == 5


def test_evaluators_and_export_fall_back_and_fail_in_one_line(damaged_run, tmp_path, capsys):
    from evaluate.perplexity import main as perplexity_main
    from train.export import main as export_main
    workdir, _ = damaged_run
    run_dir = workdir / "runs" / "run"
    for prefix in checkpoint_paths(run_dir / "checkpoints")[1:]:
        damage(Path(prefix), "torn")
    run = load_run(run_dir)                     # the newest (step 4) is intact
    assert run.checkpoint.endswith("ckpt-4")
    damage(Path(run.checkpoint), "torn")
    capsys.readouterr()
    for command, args in ((perplexity_main, ["--run", str(run_dir)]),
                          (export_main, ["--run", str(run_dir), "--output-dir", str(tmp_path)])):
        with pytest.raises(SystemExit) as stop:        # as the command line runs it
            command(args)
        assert stop.value.code == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("error: no readable checkpoint") and "ckpt-4" in line


def test_a_damaged_best_checkpoint_falls_back_to_the_training_checkpoints(tmp_path, capsys):
    main(TINY_EPOCH + run_flags(tmp_path, "best"))
    run_dir = tmp_path / "runs" / "best"
    [best] = checkpoint_paths(run_dir / "best")
    assert load_run(run_dir).checkpoint == best
    damage(Path(best))
    capsys.readouterr()
    run = load_run(run_dir)
    assert Path(run.checkpoint).parent.name == "checkpoints"
    assert "using the newest training checkpoint instead" in capsys.readouterr().err
