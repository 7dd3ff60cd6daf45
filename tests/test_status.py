"""``python -m train.status``: each run under a runs directory, and one level down, as
running, finished, to resume or not started, from its files alone."""
import fcntl
import json
import os
import threading
import time

import pytest

from tcnlm_tf.config import RunConfig
from tcnlm_tf.runs.lock import is_held, try_lock
from train.status import age, main


def make_run(path, epochs=(), test=None, stopped=None, checkpoint=None, mode="sentence"):
    path.mkdir(parents=True)
    config = RunConfig()
    config.model.mode = mode
    config.train.epochs = 30
    config.save(path / "config.json")
    history = [{"epoch": i + 1, "valid_perplexity": v, "learning_rate": lr,
                "seconds": 1200.0 + 600 * i} for i, (v, lr) in enumerate(epochs)]
    if history or test is not None:
        metrics = {"epochs": history, **({"test_perplexity": test} if test else {}),
                   **({"stopped": stopped} if stopped else {})}
        (path / "metrics.json").write_text(json.dumps(metrics))
    if checkpoint is not None:
        (path / "checkpoints").mkdir()
        (path / "checkpoints" / "checkpoint").write_text(
            f'model_checkpoint_path: "ckpt-{checkpoint}"\n')
        for step in (checkpoint - 5, checkpoint):
            index = path / "checkpoints" / f"ckpt-{step}.index"
            index.write_text("")
            os.utime(index, (time.time() - 600, time.time() - 600))
    return path


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    make_run(root / "cmp" / "lstm", [(90.0, 1e-3), (80.5, 1e-3), (81.0, 5e-4)], test=82.25,
             stopped="early_stopping", checkpoint=30)
    make_run(root / "cmp" / "tcnlm", [(95.0, 1e-3)], checkpoint=12)
    make_run(root / "pd", [(542.3, 20.0)], checkpoint=1100, mode="stream")
    make_run(root / "fresh")
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text("{not json")
    (root / "not-a-run").mkdir()
    return root


def test_every_run_with_its_state_epochs_best_and_newest_checkpoint(runs, capsys):
    with try_lock(runs / "pd"):                   # a training holds this one
        rows = {row["run"]: row for row in main(["--runs-dir", str(runs)])}
    out = capsys.readouterr().out
    assert "5 runs under" in out and "1 running, 1 finished, 1 to resume, 1 not started, " \
        "1 unreadable" in out
    assert set(rows) == {"broken", "cmp/lstm", "cmp/tcnlm", "fresh", "pd"}
    lstm = rows["cmp/lstm"]
    assert (lstm["state"], lstm["epochs"], lstm["best valid (epoch)"], lstm["lr"],
            lstm["test ppl"]) == ("finished (patience)", "3/30", "80.50 (2)", "0.0005", "82.25")
    assert lstm["newest checkpoint"] == "step 30, 10 min ago"
    assert lstm["train time"] == "1.5 h (30 min/epoch)"   # 20 + 30 + 40 minutes
    assert rows["pd"]["train time"] == "20 min (20 min/epoch)"
    assert rows["fresh"]["train time"] == "-"
    assert rows["cmp/tcnlm"]["state"] == "to resume"
    assert rows["pd"]["state"] == f"running (process {os.getpid()} on {os.uname().nodename})"
    assert rows["pd"]["model"] == "lstm (stream)"
    assert rows["fresh"]["state"] == "not started" and rows["fresh"]["epochs"] == "0/30"
    assert rows["broken"]["state"] == "unreadable config.json"
    assert "broken: " in out and "config.json is damaged (not JSON" in out
    assert "its train.run command again with --resume" in out
    assert not is_held(runs / "pd")               # released with the lock; the check took none


def test_json_rows_and_an_empty_directory(runs, tmp_path, capsys):
    rows = main(["--runs-dir", str(runs), "--json"])
    assert json.loads(capsys.readouterr().out) == rows
    (tmp_path / "empty").mkdir()
    assert main(["--runs-dir", str(tmp_path / "empty")]) == []
    assert "no run directories" in capsys.readouterr().out


def test_a_missing_runs_dir_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--runs-dir", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --runs-dir ") and err.count("\n") == 1


@pytest.mark.parametrize("seconds, text", [(45, "45 s"), (720, "12 min"), (19080, "5.3 h"),
                                           (181440, "2.1 days")])
def test_ages_read_in_the_coarsest_sensible_unit(seconds, text):
    assert age(seconds) == text


def test_a_training_starting_during_a_status_probe_still_gets_its_lock(tmp_path):
    """is_held takes a shared lock for an instant; try_lock retries over such an instant
    instead of reporting the run as held by another process."""
    probe = open(tmp_path / ".lock", "a+", encoding="utf-8")
    fcntl.flock(probe, fcntl.LOCK_SH)
    threading.Timer(0.05, lambda: fcntl.flock(probe, fcntl.LOCK_UN)).start()
    lock = try_lock(tmp_path)
    assert lock is not None
    lock.release()
    probe.close()
