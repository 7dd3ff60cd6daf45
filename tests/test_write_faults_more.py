"""Write faults outside training: a full disk while copying a comparison's record, writing a
plot or the corpus cache; a TensorBoard folder the evaluators cannot write; the one-line
messages that name the file (and quote a folder with spaces in the command they suggest);
the temporary files killed writers leave behind."""
import errno
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tcnlm_tf.data import corpus as corpus_module
from tcnlm_tf.errors import UserError, exit_on_user_error
from tests.conftest import REPO_ROOT, TINY, TINY_EPOCH, TINY_MODELS, run_flags
from tests.faults import mounts
from tests.test_cli import assert_one_line_error

NO_SPACE = "No space left on device"
PNG = b"\x89PNG\r\n\x1a\n"


def no_space_for(prefix: Path):
    """An ``os.fsync`` that fails as a full disk does for the files whose path starts with
    ``prefix`` (the temporary file beside a target: ``<folder>/.<name>.``) and syncs the
    others."""
    fsync = os.fsync

    def full(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(prefix)):
            raise OSError(errno.ENOSPC, NO_SPACE)
        fsync(fd)
    return full


def temporary_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def dead_pid() -> int:
    """The process id of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def one_error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


# -- the writing helpers ------------------------------------------------------------------

def test_a_full_disk_in_an_atomic_write_is_one_line_naming_the_file(tmp_path, monkeypatch,
                                                                   capsys):
    """A full disk fails in write or fsync, whose errors name no file: the line still says
    which file could not be written, and the old file is whole."""
    target = tmp_path / "metrics.json"
    target.write_text("old\n")
    monkeypatch.setattr(os, "fsync", no_space_for(tmp_path / ".metrics.json."))
    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(corpus_module.write_text)(target, "new\n")
    assert stop.value.code == 2
    line = one_error_line(capsys)
    assert line.startswith("error: ") and f"cannot write {target}: {NO_SPACE}" in line
    assert target.read_text() == "old\n" and not temporary_files(tmp_path)


def test_an_atomic_copy_on_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch):
    source, target = tmp_path / "new.png", tmp_path / "record" / "valid_curves.png"
    source.write_bytes(PNG + b"new")
    target.parent.mkdir()
    target.write_bytes(PNG + b"old")
    monkeypatch.setattr(os, "fsync", no_space_for(target.parent / ".valid_curves.png."))
    with pytest.raises(OSError) as raised:
        corpus_module.atomic_copy(source, target)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert target.read_bytes() == PNG + b"old" and not temporary_files(target.parent)
    monkeypatch.undo()
    corpus_module.atomic_copy(source, target)
    assert target.read_bytes() == PNG + b"new"


@pytest.mark.parametrize("how", ["write_text", "atomic_copy"])
def test_a_write_removes_the_temporary_files_of_killed_writers_of_its_target(tmp_path, how):
    """What a killed write left beside its target (``.<name>.<host>~<pid>.tmp`` of a
    process of this machine that is gone, or ``.<name>.<pid>.tmp`` as earlier versions
    named it) goes at the next write of that target; a live process's, another machine's
    (in a shared folder: its process is not one of ours) and another target's stay."""
    target = tmp_path / "metrics.json"
    dead, live, host = dead_pid(), os.getppid(), corpus_module.HOST
    kept = [f".metrics.json.{host}~{live}.tmp", f".metrics.json.other-{host}~{dead}.tmp",
            f".other.json.{host}~{dead}.tmp"]
    for name in kept + [f".metrics.json.{host}~{dead}.tmp", f".metrics.json.{dead}.tmp"]:
        (tmp_path / name).write_text("half a file")
    if how == "write_text":
        corpus_module.write_text(target, "{}\n")
    else:
        (tmp_path / "source").write_text("{}\n")
        corpus_module.atomic_copy(tmp_path / "source", target)
    assert target.read_text() == "{}\n"
    assert temporary_files(tmp_path) == sorted(kept)


def test_a_failed_plot_keeps_the_old_png(tmp_path, monkeypatch, capsys):
    """evaluate.curve on a full disk: one line naming the PNG, and the plot that was there
    is whole (a plain write truncated it first)."""
    from evaluate.curve import main as curve

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"train": {"learning_rate": 1.0}}))
    (run / "metrics.json").write_text(json.dumps({"epochs": [
        {"epoch": 1, "valid_perplexity": 120.0, "learning_rate": 1.0},
        {"epoch": 2, "valid_perplexity": 110.0, "learning_rate": 0.5}]}))
    plot = run / "learning_curve.png"
    plot.write_bytes(PNG + b"an earlier plot")
    monkeypatch.setattr(os, "fsync", no_space_for(run / ".learning_curve.png."))
    with pytest.raises(SystemExit) as stop:
        curve(["--run", str(run)])
    assert stop.value.code == 2
    line = one_error_line(capsys)
    assert f"cannot write {plot}: {NO_SPACE}" in line
    assert plot.read_bytes() == PNG + b"an earlier plot" and not temporary_files(run)


# -- the corpus cache ---------------------------------------------------------------------

def test_a_full_disk_in_the_corpus_cache_is_one_line_naming_it_and_cache_dir(tmp_path,
                                                                              monkeypatch):
    from tcnlm_tf.data.loading import load_corpus
    from tests.test_shards import config, write_corpus

    write_corpus(tmp_path / "data", documents=60)
    cache = tmp_path / "cache"
    monkeypatch.setattr(os, "fsync", no_space_for(cache / "prepared"))
    with pytest.raises(UserError) as raised:
        load_corpus(config(tmp_path / "data"), cache_dir=cache, log=lambda line: None)
    message = str(raised.value)
    assert "\n" not in message and NO_SPACE in message
    assert f"cannot write the corpus cache {cache / 'prepared'}" in message
    assert "--cache-dir" in message and "--runs-dir" not in message
    assert not list((cache / "prepared").iterdir())           # nothing half prepared kept


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 16 KiB tmpfs (room for a vocabulary, not for a corpus's shards). Mounting needs
    root: elsewhere the test fails naming the fix rather than being skipped unseen."""
    why = mounts.unavailable()
    if why:
        pytest.fail(f"{why}; run the tests as root (or in a container allowed to mount)")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)],
                   check=True, capture_output=True, text=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.slow
def test_a_cache_dir_on_a_full_disk_is_one_line_not_an_hdf5_crash(tmp_path, small_tmpfs):
    """A disk that fills while the corpus's shards are written (HDF5 files) ends in one line
    naming the cache and --cache-dir, not in h5py's multi-line errors (or a crash at exit)."""
    from tests.test_shards import write_corpus

    write_corpus(tmp_path / "data", documents=400)
    result = subprocess.run(
        [sys.executable, "-m", "train.run", "--dataset", "mine", "--data-dir",
         str(tmp_path / "data"), "--hidden-size", "8", "--embedding-dim",
         "8", "--max-steps", "1", "--runs-dir", str(tmp_path / "runs"), "--cache-dir",
         str(small_tmpfs)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert_one_line_error(result, f"cannot write the corpus cache {small_tmpfs / 'prepared'}",
                          NO_SPACE, "--cache-dir")
    assert not list((small_tmpfs / "prepared").iterdir())


# -- TensorBoard outside training ---------------------------------------------------------

@pytest.fixture(scope="module")
def topic_run(tmp_path_factory):
    """A tiny trained TCNLM run (treat as read-only: copy it with :func:`copy_of`)."""
    from train.run import main as train

    root = tmp_path_factory.mktemp("faults")
    train(TINY + TINY_MODELS["tcnlm"] + run_flags(root, "tcnlm"))
    return root / "runs" / "tcnlm"


def copy_of(run: Path, tmp_path: Path, unwritable_board: bool = False) -> Path:
    """A copy of ``run`` under ``tmp_path``; with ``unwritable_board`` its ``tensorboard``
    is a file, which no summary writer can write into (as a read-only folder or a full disk,
    and also for root)."""
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    if unwritable_board:
        shutil.rmtree(copy / "tensorboard", ignore_errors=True)
        (copy / "tensorboard").write_text("a file where the folder would be\n")
    return copy


def assert_warning(capsys, board: Path, *written: Path) -> None:
    """One warning line on stderr naming the TensorBoard folder and what was written."""
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: "), lines
    assert f"not written to TensorBoard ({board})" in lines[0], lines[0]
    assert "function_node" not in lines[0] and "[Op:" not in lines[0], lines[0]
    for path in written:
        assert str(path) in lines[0], (path, lines[0])


@pytest.mark.slow
def test_infer_warns_when_tensorboard_cannot_be_written(topic_run, tmp_path, capsys):
    """evaluate.infer with an unwritable TensorBoard folder: its numbers and bar chart are
    written, with one warning naming them and the folder, and it succeeds."""
    from evaluate.infer import main as infer

    run = copy_of(topic_run, tmp_path, unwritable_board=True)
    result = infer(["--run", str(run)])
    assert len(result["topics"]) == 4
    assert (run / "topics_doc0.png").read_bytes().startswith(PNG)
    assert_warning(capsys, run / "tensorboard", run / "topics_doc0.png")


@pytest.mark.slow
def test_infer_on_a_full_disk_keeps_the_old_bar_chart(topic_run, tmp_path, monkeypatch,
                                                      capsys):
    from evaluate.infer import main as infer

    run = copy_of(topic_run, tmp_path)
    plot = run / "topics_doc0.png"
    plot.write_bytes(PNG + b"an earlier chart")
    monkeypatch.setattr(os, "fsync", no_space_for(run / ".topics_doc0.png."))
    with pytest.raises(SystemExit) as stop:
        infer(["--run", str(run)])
    assert stop.value.code == 2
    assert f"cannot write {plot}: {NO_SPACE}" in one_error_line(capsys)
    assert plot.read_bytes() == PNG + b"an earlier chart" and not temporary_files(run)


@pytest.mark.slow
def test_topics_and_coherence_warn_naming_what_they_wrote(topic_run, tmp_path, capsys):
    from evaluate.coherence import main as coherence
    from evaluate.topics import main as topics

    run = copy_of(topic_run, tmp_path, unwritable_board=True)
    topics(["--run", str(run)])
    assert_warning(capsys, run / "tensorboard", run / "topics.txt")
    coherence(["--run", str(run)])
    assert_warning(capsys, run / "tensorboard", run / "coherence.json")


@pytest.mark.slow
def test_sememes_warns_when_tensorboard_cannot_be_written(tmp_path, capsys):
    from evaluate.sememes import main as sememes
    from train.run import main as train

    train(TINY + TINY_MODELS["sdlm"] + run_flags(tmp_path, "sdlm"))
    run = tmp_path / "runs" / "sdlm"
    shutil.rmtree(run / "tensorboard")
    (run / "tensorboard").write_text("a file where the folder would be\n")
    capsys.readouterr()
    results = sememes(["--run", str(run), "--text", "the"])
    assert len(results) == 1 and len(results[0]["words"]) == 5
    assert_warning(capsys, run / "tensorboard" / "sememes")


# -- evaluate.compare's records -----------------------------------------------------------

@pytest.mark.slow
def test_a_record_that_cannot_be_written_keeps_the_old_file_and_is_named(tmp_path, monkeypatch,
                                                                        capsys):
    """A full disk while the table's plot is copied into --record-dir: the plot there is
    whole, the error names that file (the row trained: not "training failed"), and the
    same command again, with room on the disk, records it. The comparison's folder has a
    space in its name: the TensorBoard command printed quotes it."""
    from evaluate.compare import main as compare

    runs, record = tmp_path / "runs dir", tmp_path / "record"
    record.mkdir()
    plot = record / "valid_curves.png"
    plot.write_bytes(PNG + b"an earlier comparison's plot")
    argv = ["--models", "lstm", "--runs-dir", str(runs), "--cache-dir",
            str(tmp_path / "cache"), "--name", "cmp", "--record-dir", str(record), "--",
            *TINY_EPOCH]
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", no_space_for(record / ".valid_curves.png."))
        with pytest.raises(SystemExit) as stop:
            compare(argv)
    assert stop.value.code == 2
    line = one_error_line(capsys)
    assert line.startswith("error: ") and "training failed" not in line
    assert f"{plot}: {NO_SPACE}" in line and "lstm" in line
    assert plot.read_bytes() == PNG + b"an earlier comparison's plot"
    assert not temporary_files(record)

    shutil.rmtree(runs / "cmp" / "tensorboard")
    (runs / "cmp" / "tensorboard").write_text("a file where the folder would be\n")
    compare(argv)                                        # the disk has room again
    assert plot.read_bytes().startswith(PNG) and plot.read_bytes() != (
        PNG + b"an earlier comparison's plot")
    captured = capsys.readouterr()
    assert f"tensorboard --logdir {shlex.quote(str(runs / 'cmp'))}" in captured.out
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: "), lines
    assert f"({runs / 'cmp' / 'tensorboard'})" in lines[0]
    assert str(runs / "cmp" / "comparison.md") in lines[0]


# -- the command a stopped run prints -----------------------------------------------------

@pytest.mark.slow
def test_the_resume_command_after_sigterm_quotes_a_folder_with_spaces(tmp_path):
    runs = tmp_path / "my runs"
    process = subprocess.Popen(
        [sys.executable, "-m", "train.run", *TINY_EPOCH, "--epochs", "2", "--runs-dir",
         str(runs), "--cache-dir", str(tmp_path / "cache"), "--run-name", "stopped"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"})
    for line in process.stdout:
        if line.startswith("epoch 1/2"):
            process.send_signal(signal.SIGTERM)
            break
    out = process.communicate(timeout=240)[0]
    assert process.returncode == 143, out[-2000:]
    [message] = [line for line in out.splitlines() if line.startswith("stopped by SIGTERM")]
    command = shlex.split(message.split("continue with the same command and ", 1)[1])
    assert command == ["--resume", "--runs-dir", str(runs), "--run-name", "stopped"]
