"""SIGTERM and Ctrl-C stop a training or a comparison cleanly (:mod:`train.stopping`): the
signal is recorded, honoured at the next step, and a second Ctrl-C stops at once."""
import os
import signal
import sys
import threading

import pytest

from evaluate import compare
from train.stopping import StopRequests


def test_the_first_signal_is_recorded_and_the_handlers_are_restored(capsys):
    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    with StopRequests() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.cause == "SIGTERM" and stop.exit_code == 143
        os.kill(os.getpid(), signal.SIGTERM)          # a second SIGTERM changes nothing
        assert stop.signal == signal.SIGTERM
    assert {number: signal.getsignal(number) for number in before} == before
    assert capsys.readouterr().err.count("SIGTERM received: stopping after the current step") == 1


def test_ctrl_c_twice_stops_at_once():
    with StopRequests() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.cause == "SIGINT" and stop.exit_code == 130
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_outside_the_main_thread_nothing_is_installed():
    seen = {}

    def enter():
        with StopRequests() as stop:
            seen["handler"] = signal.getsignal(signal.SIGTERM)
            seen["requested"] = stop.requested

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    assert seen == {"handler": signal.getsignal(signal.SIGTERM), "requested": False}
    assert StopRequests().cause == "another worker's stop request"
    assert StopRequests().exit_code == 143


#: a stand-in for train.run: says it is up, then exits 143 on SIGTERM like a stopped run
CHILD = ("import signal, sys, time\n"
         "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n"
         "print('up', flush=True)\n"
         "time.sleep(120)\n")


def test_a_comparison_stopped_by_sigterm_stops_its_runs_and_starts_no_other(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(compare, "POLL_SECONDS", 0.1)
    commands = {row: [sys.executable, "-c", CHILD] for row in ("a", "b", "c")}
    recorded = []

    def stop_when_both_are_up():
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        while not all(log.is_file() and "up" in log.read_text() for log in logs):
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_both_are_up, daemon=True).start()
    with pytest.raises(SystemExit) as exit_info:
        compare.run_commands(commands, tmp_path, jobs=2, on_success=recorded.append)
    assert exit_info.value.code == 143
    assert recorded == []                         # a stopped run is not finished
    assert not (tmp_path / "c.log").exists()      # the pending row never started
    err = capsys.readouterr().err
    assert ("stopped by SIGTERM: a, b saved a checkpoint and stopped; c did not start; "
            "run the same command again") in err
