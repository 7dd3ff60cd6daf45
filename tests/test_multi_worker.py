"""``--strategy multi_worker``: two worker processes on this machine (a two-worker
``TF_CONFIG`` cluster on 127.0.0.1) take exactly the optimiser steps that one process takes
with the same global batch, also across a restart of both workers with ``--resume``. If the
input were not sharded exactly (each worker training on the whole global batch, or on the
wrong slice) the weights would differ. Only the chief writes the run directory."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import REPO_ROOT, TINY, TINY_EPOCH, run_flags

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

#: seconds for each launch of the two workers (each imports TensorFlow and trains 2-3 steps)
LAUNCH_TIMEOUT = 150
#: no dropout: the two workers draw masks for their halves, one process for the whole batch
FLAGS = [*TINY, "--model", "lstm", "--dropout", "0"]
#: FLAGS for one whole epoch: its end (validation, the best weights, the test split) needs
#: every worker in its collectives
EPOCH_FLAGS = [*TINY_EPOCH, "--model", "lstm", "--dropout", "0"]


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:   # closed just before the workers bind them
        sock.close()
    return ports


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run_workers(args: list[str], count: int = 2) -> list[str]:
    """Launch ``count`` workers of one cluster with ``args``; their stdouts (all must exit 0
    within LAUNCH_TIMEOUT seconds, else all are killed and the test fails)."""
    ports = _free_ports(count)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "train.run", *args, "--strategy", "multi_worker"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": index}}),
                 TCNLM_COLLECTIVE_TIMEOUT=str(LAUNCH_TIMEOUT)))
        for index in range(count)]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=LAUNCH_TIMEOUT))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        tails = [_tail(proc.communicate()[1]) for proc in procs]
        pytest.fail(f"multi-worker run did not finish in {LAUNCH_TIMEOUT} s:\n"
                    + "\n".join(f"--- worker {i} stderr:\n{t}" for i, t in enumerate(tails)))
    for index, (proc, (_, stderr)) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, f"worker {index} exited {proc.returncode}:\n{_tail(stderr)}"
    return [stdout for stdout, _ in outputs]


def _run_single(args: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "train.run", *args, "--strategy", "mirrored"],
                            cwd=REPO_ROOT, capture_output=True, text=True, env=_env(),
                            timeout=LAUNCH_TIMEOUT)
    assert result.returncode == 0, _tail(result.stderr)


def _weights(run_dir) -> tuple[list[np.ndarray], str]:
    from tcnlm_tf.runs.loading import load_run

    run = load_run(run_dir)
    return [w.numpy() for w in run.model.weights], run.checkpoint


def test_two_workers_match_one_process(tmp_path):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    single = [*EPOCH_FLAGS, *cache, "--runs-dir", str(tmp_path / "single"), "--run-name", "run"]
    # the single process first: it also fills the corpus cache the workers then share
    _run_single(single)

    runs = tmp_path / "multi"
    multi = [*FLAGS, *cache, "--runs-dir", str(runs), "--run-name", "run"]
    outputs = _run_workers(multi)   # --max-steps 3 (TINY)
    assert "(chief of a multi-worker cluster)" in outputs[0], outputs[0]
    assert "(not the chief of a multi-worker cluster)" in outputs[1], outputs[1]
    # only the chief wrote the run directory (and holds its lock), and nothing of the other
    # worker's is left
    assert sorted(p.name for p in (runs / "run").iterdir()) == [
        ".lock", "checkpoints", "config.json", "lm_vocab.txt", "metrics.json", "tensorboard",
        "topic_vocab.txt", "vocab_digests.json"]
    assert (runs / "run" / ".lock").read_text().split()[1].isdigit()   # host, pid
    assert json.loads((runs / "run" / "metrics.json").read_text())["steps"] == 3

    # restart both workers: each restores the chief's step-3 checkpoint and goes on to the
    # end of the epoch, its validation, the best weights and the test split
    outputs = _run_workers([*EPOCH_FLAGS, *cache, "--runs-dir", str(runs), "--run-name", "run",
                            "--resume"])
    assert all("resumed from" in out and "step 3" in out for out in outputs), outputs
    # each worker built only its own rows of each batch, and together every target once
    read = [re.search(r"input pipeline (\d) of 2 read (\d+) of the (\d+) targets trained on "
                      r"in this epoch since batch 3", out) for out in outputs]
    assert all(read), outputs
    assert sorted(int(m[1]) for m in read) == [1, 2] and read[0][3] == read[1][3]
    assert 0 < int(read[0][2]) < int(read[0][3])
    assert int(read[0][2]) + int(read[1][2]) == int(read[0][3])
    metrics = json.loads((runs / "run" / "metrics.json").read_text())
    single_metrics = json.loads((tmp_path / "single" / "run" / "metrics.json").read_text())
    assert metrics["steps"] == single_metrics["steps"] > 3
    assert metrics["test_perplexity"] == pytest.approx(single_metrics["test_perplexity"],
                                                       rel=1e-5)

    multi_weights, multi_checkpoint = _weights(runs / "run")
    single_weights, single_checkpoint = _weights(tmp_path / "single" / "run")
    assert multi_checkpoint.rsplit("-", 1)[1] == single_checkpoint.rsplit("-", 1)[1]
    assert len(multi_weights) == len(single_weights) > 0
    diff = max(float(np.abs(a - b).max()) for a, b in zip(multi_weights, single_weights))
    assert diff < 1e-5, f"two workers and one process trained different weights: {diff}"


def _lone_worker(tmp_path, timeout: float) -> tuple[subprocess.Popen, str]:
    """Worker 0 of a two-worker cluster whose worker 1 never starts, in its own process
    group (as a terminal's foreground job)."""
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    proc = subprocess.Popen(
        [sys.executable, "-m", "train.run", *FLAGS, *run_flags(tmp_path, "lone"),
         "--strategy", "multi_worker"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        env=_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": 0}}),
                 TCNLM_COLLECTIVE_TIMEOUT=str(timeout)))
    return proc, f"127.0.0.1:{ports[1]}"


def test_a_worker_whose_peer_never_starts_ends_with_one_line(tmp_path):
    """The strategy's start-up waited without bound for a peer that never came (holding
    the GIL, deaf to SIGTERM); now it ends after TCNLM_COLLECTIVE_TIMEOUT seconds with one
    line naming the missing peer."""
    proc, peer = _lone_worker(tmp_path, timeout=5)
    _, stderr = proc.communicate(timeout=LAUNCH_TIMEOUT)
    assert proc.returncode != 0, _tail(stderr)
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: multi-worker training failed: worker 0 waited 5 s") and \
        f"worker 1 ({peer}) did not appear" in last, _tail(stderr)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                if entry.isdigit() and handle.read().rsplit(") ", 1)[1].split()[1] == str(pid):
                    found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def test_ctrl_c_ends_a_worker_waiting_for_its_peers(tmp_path):
    proc, _ = _lone_worker(tmp_path, timeout=LAUNCH_TIMEOUT)
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while not _children(proc.pid):       # the start-up watchdog: the wait has begun
        assert proc.poll() is None and time.monotonic() < deadline, "no wait began"
        time.sleep(0.5)
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("Ctrl-C did not end the worker waiting for its peers")
    assert proc.returncode != 0
    assert "interrupted while waiting for the other workers" in stderr.strip().splitlines()[-1]


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
        return int(next(line for line in handle if line.startswith("Threads:")).split()[1])


def test_workers_keep_their_threads_and_a_dead_one_stops_the_other(tmp_path):
    """A collective timeout (TensorFlow's CommunicationOptions) parked a thread for the
    whole timeout on every collective, 18 a step, until a worker could start no thread and
    died (after ~13,000). Two workers train three epochs (243 steps) with a bounded thread
    count; then worker 1 is killed and worker 0 stops with one line (TensorFlow's
    heartbeats notice the dead peer) instead of hanging."""
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    logs = [tmp_path / f"worker-{index}.log" for index in range(2)]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "train.run", *EPOCH_FLAGS, *run_flags(tmp_path, "long"),
         "--epochs", "30", "--patience", "30", "--strategy", "multi_worker"],
        cwd=REPO_ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
        env=_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": index}}),
                 TCNLM_COLLECTIVE_TIMEOUT=str(LAUNCH_TIMEOUT)))
        for index, log in enumerate(logs)]
    try:
        most, deadline = 0, time.monotonic() + 2 * LAUNCH_TIMEOUT
        while "epoch 4/30" not in logs[0].read_text():
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, \
                _tail(logs[0].read_text())
            most = max(most, _threads(procs[0].pid))
            time.sleep(0.5)
        assert most < 600, f"worker 0 ran {most} threads"
        procs[1].kill()
        status = procs[0].wait(timeout=LAUNCH_TIMEOUT)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    last = logs[0].read_text().strip().splitlines()[-1]
    assert status == 2 and last.startswith("error: multi-worker training failed: "), last
