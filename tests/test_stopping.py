"""SIGTERM and Ctrl-C stop a training or a comparison cleanly (:mod:`train.stopping`): the
signal is recorded, honoured at the next step, and a second Ctrl-C stops at once."""
import os
import signal
import sys
import threading

import pytest

from evaluate import compare
from train.stopping import StopRequests


def installed(stop):
    """Whether ``stop``'s handlers are in place (else a signal would end pytest itself)."""
    return all(getattr(signal.getsignal(number), "__self__", None) is stop
               for number in (signal.SIGTERM, signal.SIGINT))


def test_the_first_signal_is_recorded_and_the_handlers_are_restored(capfd):
    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    with StopRequests() as stop:
        assert not stop.requested and installed(stop)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.cause == "SIGTERM" and stop.exit_code == 143
        os.kill(os.getpid(), signal.SIGTERM)          # a second SIGTERM changes nothing
        assert stop.signal == signal.SIGTERM
    assert {number: signal.getsignal(number) for number in before} == before
    assert capfd.readouterr().err.count("SIGTERM received: stopping after the current step") == 1


def test_ctrl_c_twice_stops_at_once():
    with StopRequests() as stop:
        assert installed(stop)
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


#: a stand-in for train.run: says it is up, then exits with {code} on SIGTERM (143: a run
#: stopped at its checkpoint)
CHILD = ("import signal, sys, time\n"
         "signal.signal(signal.SIGTERM, lambda *_: sys.exit({code}))\n"
         "print('up', flush=True)\n"
         "time.sleep(120)\n")


def test_a_comparison_stopped_by_sigterm_stops_its_runs_and_starts_no_other(
        tmp_path, monkeypatch, capsys):
    """Run a stops at its checkpoint (exit 143); run b fails as it stops (exit 1) and is
    reported as failed, not as stopped; run c never starts."""
    monkeypatch.setattr(compare, "POLL_SECONDS", 0.1)
    commands = {row: [sys.executable, "-c", CHILD.format(code=code)]
                for row, code in (("a", 143), ("b", 1), ("c", 143))}
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
    assert ("stopped by SIGTERM: a stopped at their last checkpoint; b failed (see their "
            "output); c did not start; run the same command again") in err
