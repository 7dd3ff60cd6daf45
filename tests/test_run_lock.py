"""One writer per run directory (tcnlm_tf.runs.lock): two trainings started on one --run-name
end in two directories, each with its own configuration, weights and numbers; a resume of a
run another process is training is a one-line error; a crashed holder leaves no stale
lock."""
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tcnlm_tf.runs.lock import holder, try_lock
from tests.conftest import REPO_ROOT, TINY, TINY_EPOCH, run_flags
from tests.test_cli import assert_one_line_error
from train.run import main

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


def test_two_trainings_on_one_run_name_started_at_once(tmp_path):
    """Two processes, two seeds, one --run-name, started together: one trains in the named
    directory, the other in ``<name>-2``; each directory's config holds its own seed and
    each process prints the test perplexity its own directory records."""
    processes = {seed: subprocess.Popen(
        [sys.executable, "-m", "train.run", *TINY_EPOCH, "--seed", seed,
         *run_flags(tmp_path, "same")], cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}) for seed in ("1", "2")}
    outputs = {seed: process.communicate(timeout=600)[0] for seed, process in processes.items()}
    assert all(process.returncode == 0 for process in processes.values()), outputs
    directories = {}
    for seed, output in outputs.items():
        directory = Path(re.search(r"^run directory: (.+)$", output, re.M).group(1))
        directories[seed] = directory.name
        config = json.loads((directory / "config.json").read_text())
        assert config["train"]["seed"] == int(seed)
        metrics = json.loads((directory / "metrics.json").read_text())
        printed = float(re.search(r"^  lstm\s+([\d.]+)$", output, re.M).group(1))
        assert printed == pytest.approx(metrics["test_perplexity"], abs=0.005)
    assert sorted(directories.values()) == ["same", "same-2"]


def test_a_held_run_directory_is_passed_over_or_refused(tmp_path):
    """Another process's lock (here an open lock of the test's own, which the kernel treats
    the same): a fresh run goes to the next free name; --resume of the held run is one line
    naming the holder; once released, the resume goes on."""
    main(TINY + run_flags(tmp_path, "held"))                       # 3 steps, a checkpoint
    lock = try_lock(tmp_path / "runs" / "held")
    assert lock is not None and str(os.getpid()) in holder(tmp_path / "runs" / "held")
    try:
        result = subprocess.run([sys.executable, "-m", "train.run", *TINY, "--max-steps", "6",
                                 "--resume", *run_flags(tmp_path, "held")], cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=300)
        assert_one_line_error(result, "in use by process", str(os.getpid()), "--run-name")
        fresh = tmp_path / "runs" / "fresh"
        with try_lock(fresh):
            main(TINY + run_flags(tmp_path, "fresh"))
        assert (tmp_path / "runs" / "fresh-2" / "checkpoints").is_dir()
        assert not (fresh / "checkpoints").exists()
    finally:
        lock.release()
    main(TINY + ["--max-steps", "6", "--resume"] + run_flags(tmp_path, "held"))
    metrics = json.loads((tmp_path / "runs" / "held" / "metrics.json").read_text())
    assert metrics["steps"] == 6


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    """The kernel drops a killed process's lock: the lock file stays, the lock does not."""
    directory = tmp_path / "run"
    holder_process = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from tcnlm_tf.runs.lock import try_lock; "
         "lock = try_lock(sys.argv[1]); print('locked', flush=True); time.sleep(600)",
         str(directory)], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert holder_process.stdout.readline().strip() == "locked"
    assert try_lock(directory) is None
    holder_process.kill()
    holder_process.wait()
    assert (directory / ".lock").is_file()
    lock = try_lock(directory)
    assert lock is not None
    lock.release()


def test_exports_at_once_take_one_version_each_and_bad_output_dirs_are_one_line(tmp_path):
    """Two train.export processes on one model name wait for each other and write versions
    1 and 2 (before, both could pick version 1); an --output-dir under a file is a one-line
    error naming the directory."""
    main(TINY + run_flags(tmp_path, "exported"))
    command = [sys.executable, "-m", "train.export", "--run", str(tmp_path / "runs" / "exported"),
               "--output-dir", str(tmp_path / "saved")]
    processes = [subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    written = sorted(re.search(r"^SavedModel: (.+)$", out, re.M).group(1) for out in outputs)
    assert [Path(w).name for w in written] == ["1", "2"]
    assert all((Path(w) / "saved_model.pb").is_file() for w in written)
    (tmp_path / "file").write_text("")
    result = subprocess.run([*command[:-1], str(tmp_path / "file" / "saved")], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert_one_line_error(result, "cannot write the export under", "--output-dir")


def test_evaluators_run_twice_at_once_on_one_run_both_finish_whole(tmp_path):
    """Every command twice at once on one run, for the evaluators that
    write into it: each output (topics.txt, coherence.json) is written
    under a name of its own process and renamed into place, so two at once both exit 0 and
    the file is one whole copy of the same content, never a mix of two."""
    from tcnlm_tf.models.registry import MODELS

    flags = ["--model", "tcnlm", *MODELS["tcnlm"].test_flags]
    main(TINY + flags + run_flags(tmp_path, "shared"))
    run = tmp_path / "runs" / "shared"
    for module, output in (("evaluate.topics", "topics.txt"),
                           ("evaluate.coherence", "coherence.json")):
        command = [sys.executable, "-m", module, "--run", str(run)]
        processes = [subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        outputs = [process.communicate(timeout=600)[0] for process in processes]
        assert [process.returncode for process in processes] == [0, 0], outputs
        together = (run / output).read_text()
        importlib.import_module(module).main(["--run", str(run)])       # alone
        assert (run / output).read_text() == together, module
        assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
