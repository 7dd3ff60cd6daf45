"""How training is spread over devices and machines: the ``tf.distribute`` strategies and
the cluster helpers the training loop (:mod:`train.trainer`) runs on.

* ``--strategy mirrored`` (default): ``tf.distribute.MirroredStrategy`` over every local GPU,
  or the CPU when there is none (:func:`make_strategy`);
* ``--strategy multi_worker``: ``tf.distribute.MultiWorkerMirroredStrategy``, one process
  per machine, the cluster from ``TF_CONFIG`` (:func:`make_multi_worker_strategy`). Each
  worker builds, of every global training batch, only its own replicas' rows (its input
  pipeline's share, :func:`input_share`), reading only their text; each replica's rows are
  the slice of the global batch that :func:`replica_slice` cuts, so the step is the one a
  single process takes. Evaluation batches, and the batches of a model's further tasks,
  are built whole on every worker and sliced. Only the chief (:func:`is_chief`) writes the
  run directory. A worker that dies is noticed within seconds by TensorFlow's
  coordination-service heartbeats; one that is alive but stuck, by :class:`StallGuard`
  after :func:`collective_timeout` seconds; either way the others fail with one line
  (:func:`collective_failure`) instead of hanging.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
from typing import Callable

import tensorflow as tf
from tensorflow.python.eager import context as eager_context

from tcnlm_tf.data.pipeline import Share
from tcnlm_tf.errors import UserError

SUM = tf.distribute.ReduceOp.SUM
#: seconds a multi-worker process waits for the other workers, at start-up and in a call
#: that runs collectives (:class:`StallGuard`), before it fails; the environment variable
#: TCNLM_COLLECTIVE_TIMEOUT overrides it
COLLECTIVE_TIMEOUT = 300.0

#: what a failed collective raises (timed out, or aborted because a peer went away)
COLLECTIVE_ERRORS = (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
                     tf.errors.CancelledError, tf.errors.AbortedError)


def collective_timeout() -> float:
    """:data:`COLLECTIVE_TIMEOUT`, or ``$TCNLM_COLLECTIVE_TIMEOUT`` when set."""
    value = os.environ.get("TCNLM_COLLECTIVE_TIMEOUT")
    if value is None:
        return COLLECTIVE_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UserError(f"TCNLM_COLLECTIVE_TIMEOUT must be a positive number of seconds, "
                        f"got {value!r}")
    return seconds


def replica_slice(batch: dict, context: tf.distribute.experimental.ValueContext) -> dict:
    """Replica ``r`` of ``R``'s share of a global ``batch`` (every tensor's leading axis):
    rows ``[r * ceil(n / R), (r + 1) * ceil(n / R))``, fewer (or none) for the last replicas
    of a final partial batch. The whole batch when ``R = 1``."""
    replicas = context.num_replicas_in_sync
    if replicas == 1:
        return batch
    replica = context.replica_id_in_sync_group

    def piece(tensor):
        share = (tf.shape(tensor)[0] + replicas - 1) // replicas
        return tensor[replica * share:(replica + 1) * share]

    return tf.nest.map_structure(piece, batch)


def input_context(strategy: tf.distribute.Strategy) -> tf.distribute.InputContext:
    """This process's input pipeline under ``strategy``: one pipeline per worker, each
    feeding that worker's replicas (the ``InputContext`` that
    ``strategy.distribute_datasets_from_function`` hands its dataset function)."""
    ids = strategy.experimental_local_results(
        strategy.experimental_distribute_values_from_function(
            lambda context: context.replica_id_in_sync_group))
    local, total = len(ids), strategy.num_replicas_in_sync
    return tf.distribute.InputContext(num_input_pipelines=total // local,
                                      input_pipeline_id=int(min(ids)) // local,
                                      num_replicas_in_sync=total)


def input_share(strategy: tf.distribute.Strategy) -> Share:
    """:class:`~tcnlm_tf.data.pipeline.Share` of this process's :func:`input_context`."""
    context = input_context(strategy)
    local = context.num_replicas_in_sync // context.num_input_pipelines
    return Share(first=context.input_pipeline_id * local, local=local,
                 total=context.num_replicas_in_sync)


def make_strategy(kind: str = "mirrored") -> tf.distribute.Strategy:
    """``mirrored``: MirroredStrategy over all local GPUs, or over the CPU when there is none.
    ``multi_worker``: MultiWorkerMirroredStrategy over the cluster in ``$TF_CONFIG`` (create it
    before any other TensorFlow op of the process runs)."""
    if kind == "multi_worker":
        return make_multi_worker_strategy()
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus] if gpus else ["/cpu:0"]
    return tf.distribute.MirroredStrategy(devices=devices)


def make_multi_worker_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy from ``$TF_CONFIG``; waiting for the other workers to
    start takes at most :func:`collective_timeout` seconds."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise UserError("--strategy multi_worker needs the TF_CONFIG environment variable, e.g. "
                        'TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                        '"task": {"type": "worker", "index": 0}}\'')
    try:
        tf_config = json.loads(raw)
        task = tf_config["task"]
        workers = tf_config["cluster"][task["type"]]
        if not 0 <= int(task["index"]) < len(workers):
            raise ValueError
    except (ValueError, TypeError, KeyError):
        raise UserError(f"TF_CONFIG is not valid: expected a JSON object with "
                        f'"cluster" (task type -> host:port list) and "task" ("type" and '
                        f'an "index" into that list), got {raw!r}') from None
    timeout = collective_timeout()
    # No per-collective timeout (CommunicationOptions.timeout_seconds): TensorFlow parks a
    # thread for the whole timeout on every collective it runs, 18 a training step here,
    # until the process cannot start another (at about 13,000); StallGuard replaces it.
    options = tf.distribute.experimental.CommunicationOptions()
    # The constructor waits in TensorFlow's coordination service for every worker, with no
    # timeout, holding the GIL (no Python thread or signal handler runs meanwhile) and
    # deaf to SIGTERM. A watchdog process bounds the wait: it ends this process, with one
    # line naming the workers that did not appear, unless told within `timeout` seconds
    # that the strategy exists; Ctrl-C (SIGINT to the process group) ends both.
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), f"{timeout:g}",
         json.dumps({"workers": workers, "type": task["type"], "index": int(task["index"])})],
        stdin=subprocess.PIPE)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    finally:
        watchdog.stdin.close()          # the watchdog exits when its input closes
        watchdog.wait()


#: the start-up watchdog of make_multi_worker_strategy (argv: pid, seconds, cluster JSON)
_WATCHDOG = """
import json, os, select, signal, socket, sys
pid, timeout, cluster = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])

def end(message):
    sys.stderr.write("error: " + message + "\\n")
    sys.stderr.flush()
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)

def reachable(address):
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
        return True
    except (OSError, ValueError):
        return False

interrupted = lambda number, frame: end(
    "multi-worker training interrupted while waiting for the other workers to start")
signal.signal(signal.SIGINT, interrupted)
signal.signal(signal.SIGTERM, interrupted)
if select.select([sys.stdin], [], [], timeout)[0]:
    os._exit(0)                          # the strategy exists, or this process ended
me, kind = cluster["index"], cluster["type"]
missing = [f"{kind} {i} ({address})" for i, address in enumerate(cluster["workers"])
           if i != me and not reachable(address)]
absent = ", ".join(missing) or "the others, reachable but not joining,"
end(f"multi-worker training failed: {kind} {me} waited {timeout:g} s for the other workers "
    f"to start ({absent} did not appear); start every worker of TF_CONFIG with the same "
    "flags (TCNLM_COLLECTIVE_TIMEOUT sets the wait)")
"""


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the run directory: always for a single process; in a
    cluster the ``chief`` task, or ``worker`` 0 when there is no chief."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    return (resolver.task_type == "worker" and resolver.task_id == 0
            and "chief" not in resolver.cluster_spec().as_dict())


class StallGuard:
    """Fails this worker's collectives when a call that runs them (a training or evaluation
    step, a barrier: each wrapped with :meth:`guard`) has not returned after ``timeout``
    seconds, so that a peer that is alive but stuck (a hung filesystem, a stopped process)
    ends the run with one line instead of hanging it; a peer that dies is noticed sooner,
    by TensorFlow's heartbeats. One daemon thread looks at the clock once a second; a call
    costs two clock readings. (TensorFlow's own per-collective timeout does this with one
    thread per collective, kept for the whole timeout: see :func:`make_multi_worker_strategy`.)
    """

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._since: float | None = None      # when the call now running began
        threading.Thread(target=self._watch, name="tcnlm-stall-guard", daemon=True).start()

    def guard(self, function: Callable) -> Callable:
        """``function`` timed by this guard (calls are not nested: one loop makes them)."""
        @functools.wraps(function)
        def guarded(*args, **kwargs):
            self._since = time.monotonic()
            try:
                return function(*args, **kwargs)
            finally:
                self._since = None
        return guarded

    def _watch(self) -> None:
        while True:
            time.sleep(min(1.0, self.timeout / 4))
            since = self._since
            if since is not None and time.monotonic() - since > self.timeout:
                eager_context.context().abort_collective_ops(
                    tf.errors.DEADLINE_EXCEEDED,
                    f"a call running collective operations did not return within "
                    f"{self.timeout:g} s (TCNLM_COLLECTIVE_TIMEOUT): is another worker stuck?")
                return


def collective_failure(error: Exception) -> UserError:
    """The one-line message for a multi-worker collective that failed or was aborted."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if any(
        word in line.lower() for word in ("unhealthy", "heartbeat", "deadline", "timed out",
                                          "timeout", "did not return", "aborted",
                                          "unavailable"))]
    detail = (telling or lines or [""])[0]
    return UserError(f"multi-worker training failed: a collective operation was aborted (did "
                     f"another worker die, hang or become unreachable? restart all workers "
                     f"with --resume; TCNLM_COLLECTIVE_TIMEOUT sets how long a stuck one is "
                     f"waited for, now {collective_timeout():g} s): "
                     f"{type(error).__name__}: {detail[:300]}")
