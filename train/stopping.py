"""Stopping a training cleanly on SIGTERM or Ctrl-C: the step under way finishes, a
checkpoint is saved, and the process exits so that ``--resume`` goes on from that step.

A batch scheduler that pre-empts a job or reaches its wall-time limit sends SIGTERM and
kills the job some seconds later (Slurm's ``KillWait``, 30 s by default); a user stops a
run with Ctrl-C (SIGINT). Without this, either signal ended the process at once and the
run lost everything since its last timed checkpoint (``--checkpoint-minutes``). While
:class:`StopRequests` is active, the first SIGTERM or SIGINT only records the request,
which :meth:`train.trainer.Trainer.fit` honours after the current step; a second Ctrl-C
stops at once, as before (``KeyboardInterrupt``).
"""
from __future__ import annotations

import os
import signal
import threading

#: the signals a training stops on, with a checkpoint
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequests:
    """Records SIGTERM and SIGINT while active (``with StopRequests() as stop:``); outside
    the main thread, where Python cannot install handlers, and when inactive it records
    nothing and :attr:`requested` stays False.

    Attributes:
        signal: the first signal received (a :class:`signal.Signals`), or None.
    """

    def __init__(self):
        self.signal: signal.Signals | None = None
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.signal is not None

    @property
    def cause(self) -> str:
        """What stopped the training, for messages: the signal's name, or another worker's
        request (a multi-worker training stops on every worker when one is asked to)."""
        return self.signal.name if self.signal is not None else "another worker's stop request"

    @property
    def exit_code(self) -> int:
        """The shell's code for a process ended by the signal: 128 + its number (SIGTERM's
        when the request came from another worker)."""
        return 128 + int(self.signal if self.signal is not None else signal.SIGTERM)

    def _handle(self, number: int, frame) -> None:
        if self.signal is not None and number == signal.SIGINT:
            raise KeyboardInterrupt          # Ctrl-C twice: stop now, without a checkpoint
        if self.signal is None:
            self.signal = signal.Signals(number)
            # straight to the file descriptor: the handler may run while the main thread is
            # inside sys.stderr's buffered write, which would refuse a reentrant call
            os.write(2, f"{self.signal.name} received: stopping after the current step with "
                        "a checkpoint (Ctrl-C again stops at once, without one)\n".encode())

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle)
                              for number in SIGNALS}
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}
