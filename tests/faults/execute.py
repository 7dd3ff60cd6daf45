"""Running a command as the command line runs it: in this process (``main(argv)``, so that
TensorFlow starts once, as the option fuzzer does), or in a process of its own
(:mod:`tests.faults.killer`) where it is to be killed."""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import ContextManager

from tests.faults.outcomes import Result

REPO_ROOT = Path(__file__).resolve().parents[2]
#: the environment variable that tells :mod:`tests.faults.killer` where to kill
KILL_ENV = "TCNLM_FAULT_KILL"


class _Timeout(Exception):
    pass


def _raise_timeout(*_) -> None:
    raise _Timeout


def _exit_code(stop: SystemExit, err: io.StringIO) -> int:
    """The exit status ``sys.exit(code)`` gives (a message is printed to stderr, status 1)."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=err)
    return 1


def in_process(module: str, argv: list[str], timeout: float,
               fault: ContextManager | None = None) -> Result:
    """``module.main(argv)`` in this process, its output captured; an escaping exception is
    the traceback the user would see; ``fault``: a context (an injected error) around it."""
    import keras

    main = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    code, returned, timed_out = 0, None, False
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                (fault or contextlib.nullcontext()):
            returned = main(list(argv))
    except _Timeout:
        code, timed_out = None, True
    except SystemExit as stop:
        code = _exit_code(stop, err)
    except BaseException:   # noqa: BLE001 - what the user would see as a traceback
        code = 1
        err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        keras.mixed_precision.set_global_policy("float32")
    return Result(code, out.getvalue(), err.getvalue(), time.perf_counter() - start, returned,
                  timed_out)


def in_subprocess(module: str, argv: list[str], timeout: float, cwd: Path,
                  kill: dict | None = None) -> Result:
    """``python -m module argv`` in a process of its own (in ``cwd``), with the kill point
    ``kill`` (:mod:`tests.faults.killer`) installed; killed with its process group on
    timeout."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
           KILL_ENV: json.dumps(kill or {})}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "tests.faults.killer", module, *argv],
                               cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return Result(None, out, err, time.perf_counter() - start, timed_out=True)
    return Result(process.returncode, out, err, time.perf_counter() - start)
