"""The distributed training loop shared by every model.

``tf.distribute.MirroredStrategy`` over all local GPUs (the CPU when there are none) runs a
custom loop with ``strategy.run``:

* objective per global batch = (sum of target NLL + sum of the model's auxiliary loss) /
  (global number of real targets): for a topic model the auxiliary loss is the per-example
  negative topic-model part of its objective, so for TCNLM this is -J of the batch (Wang et
  al. 2018 eq. 18: the ELBO of eq. 17 plus lambda times the diversity regulariser) per
  predicted token. The denominator is all-reduced across replicas, so the loss is the same
  whatever the replica count;
* gradients are summed across replicas, clipped by their *global* norm (the norm of the
  unscaled model's gradients, :func:`clip_gradients`), then applied with
  Adam or plain SGD (``--optimizer``; Keras's optimizer sums across replicas again, so each
  replica hands it its 1/R share of the already-reduced gradient);
* after each epoch: validation perplexity; on no improvement the learning rate is multiplied
  by ``lr_decay`` and after ``patience`` such epochs training stops early (epochs before
  ``lr_decay_start`` keep the rate and do not count);
* ``tf.train.CheckpointManager`` checkpoints (model, optimiser, epoch, position within the
  epoch, learning rate, best validation perplexity) at the end of every epoch, every
  ``checkpoint_minutes`` within an epoch and when ``max_steps`` is reached; ``resume()``
  restores the latest one and continues from the same batch of the same epoch (the shuffle
  order of an epoch is a function of its number); on SIGTERM or Ctrl-C (``fit(stop)``,
  :mod:`train.stopping`) the step under way finishes, a checkpoint is saved and ``fit``
  returns ``'interrupted'``;
* a model's further training tasks (:class:`~tcnlm_tf.models.base.Task`, e.g. TDLM's topic
  model) each get their own batches and their own optimiser (of the same kind); an epoch runs
  the batches of every task in one random order (a function of the seed and the epoch, so a
  resumed epoch continues the same order), each step normalised by its task's global count
  and all-reduced like the language model's; ``max_steps`` counts language-model steps;
* ``--strategy multi_worker`` (:mod:`train.distribution`, with the strategies and cluster
  helpers): every worker computes its own slice of every global batch, so the step is the
  one a single process takes. Only the chief writes the run directory; the other workers
  save their (collective) checkpoints to a scratch directory and delete them, and restore
  the chief's;
* the chief that holds the run's lock (``train.run``'s) checks before and after every write
  that its run directory is still the one it locked
  (:class:`tcnlm_tf.runs.directory.RunDirectoryWatch`): one deleted, moved or replaced
  stops training with one line, and nothing more is written; when training starts or
  resumes it removes from ``checkpoints/`` and ``best/`` what saves cut short left there,
  and lists the complete checkpoints their state files miss again
  (:func:`tcnlm_tf.runs.checkpoints.tidy_checkpoints`);
* the run directory's files are named by :class:`tcnlm_tf.runs.directory.RunDirectory`;
  validation and test run the one evaluation loop, :func:`tcnlm_tf.metrics.evaluation.summed_nll`;
* TensorBoard scalars under ``<run>/tensorboard``: ``train/loss``, ``train/perplexity``,
  ``train/learning_rate``, ``train/tokens_per_sec``, the model's auxiliary terms and each
  task's loss (``train/<task>_loss``) under ``train/<name>``, ``valid/perplexity`` and
  ``test/perplexity``; and there (:mod:`train.summaries`) the run's hyperparameters for the
  HParams dashboard when training starts, a topic model's top words per topic after every
  epoch and, with the test, the tested weights' embeddings for the projector.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import json
import math
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import keras
import numpy as np
import tensorflow as tf

from tcnlm_tf.config import RunConfig, carries_state
from tcnlm_tf.data import pipeline
from tcnlm_tf.data.corpus import atomic_write, write_text
from tcnlm_tf.data.loading import Corpus
from tcnlm_tf.decoders import output_layers
from tcnlm_tf.errors import UserError
from tcnlm_tf.metrics.evaluation import summed_nll, zero_lanes
from tcnlm_tf.metrics.perplexity import perplexity
from tcnlm_tf.models import build_model
from tcnlm_tf.metrics.topic_words import model_top_words
from tcnlm_tf.models.base import LanguageModel, Task, has_topics
from tcnlm_tf.runs.checkpoints import (model_checkpoint, quiet_pruning,
                                       restore_newest_readable, tidy_checkpoints)
from tcnlm_tf.runs.directory import (RESUME_STATE, RunDirectory, RunDirectoryGone,
                                     RunDirectoryWatch, read_json_object)
from tcnlm_tf.runs.lock import held_lock
from tcnlm_tf.tracing import any_batch_size
from train.distribution import (SUM, StallGuard, collective_timeout, input_share, is_chief,
                                make_strategy, replica_slice)
from train.stopping import StopRequests
from train.summaries import (TOP_WORDS, projector_tables, write_hparams, write_projector,
                             write_topics)

#: the keys of metrics.json that the test evaluation writes: a run that trains on after it
#: (a raised --epochs) and is stopped no longer has the weights they describe
TESTED = ("test_perplexity", "test_tokens", "test_documents", "test_tasks", "baselines")
#: what to do about a damaged metrics.json (read at --resume and before each write of it):
#: rewriting it from what the run holds would lose what only the file keeps
RESTORE_METRICS = ("restore it from a copy, or delete it to resume without the epoch history; "
                   "the checkpoints are intact")
#: what the terms checked by ``Trainer._check_finite`` are
TERM_NAMES = {"nll": "language-model loss", "aux": "model's other loss terms (aux_loss)",
              "gradient": "gradient norm", "weights": "first weight with a NaN or infinite value",
              "valid": "validation perplexity (the weights diverged)"}


class NonFiniteLoss(UserError):
    """Training stopped at a NaN or infinite loss term or gradient, or before saving weights
    that are not finite (one line: the step, the terms, the checkpoint kept and how to
    continue)."""

    def __init__(self, step: int, terms: dict[str, float | str], checkpoint: str | None):
        named = ", ".join(f"{TERM_NAMES.get(name, name + ' loss')} is {value}"
                          for name, value in terms.items())
        kept = (f"the newest checkpoint {checkpoint} is the last good state and is kept; "
                "continue from it with --resume, e.g. with a lower --learning-rate"
                if checkpoint else "no checkpoint was written yet; start again with a lower "
                                   "--learning-rate")
        super().__init__(f"training stopped at step {step}: the {named}; nothing was saved "
                         f"after it; {kept}")
        self.step, self.terms = step, terms


#: what TensorFlow raises when it cannot write a file (TensorBoard events, a checkpoint)
WRITE_ERRORS = (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError)


def _dense(grad, variable):
    """A dense gradient for the all-reduce: IndexedSlices densified, None as zeros."""
    if grad is None:
        return tf.zeros_like(variable)
    return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad


def clip_gradients(grads: list, scales: list[float], clip_norm: float) -> tuple[list, tf.Tensor]:
    """``grads`` clipped to global norm ``clip_norm`` as the *unscaled* model's would be:
    (clipped gradients, the norm).

    A weight ``v`` that the model uses as ``s * v`` (``scales``: one ``s`` per gradient, see
    :meth:`~tcnlm_tf.models.base.LanguageModel.weight_scales`) has gradient ``s * g`` where
    ``g`` is the gradient of the weight really used; the norm is taken over ``g`` (``grad /
    s``), and every gradient is multiplied by the same factor ``min(1, clip / norm)`` as the
    unscaled model's would be. So a scale changes only the optimiser's step size on its
    weight (for Adam, ``s`` times), not what the clip does: with the stored gradients, the
    topic-word weights at scale 30 made up 94 % of the squared norm of TCNLM's first
    gradient and set the clip of every other weight."""
    norm = tf.linalg.global_norm([g if s == 1.0 else g / s for g, s in zip(grads, scales)])
    clipped, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=norm)
    return clipped, norm


class Progress:
    """A Keras progress bar on a terminal; in a log file, one line per tenth of the epoch."""

    def __init__(self, total: int, log: Callable[[str], None], extra: list[str] = ()):
        self.total, self.log = total, log
        self.bar = (keras.utils.Progbar(total, unit_name="batch",
                                        stateful_metrics=["ppl", "lr", "tokens_per_sec", *extra])
                    if sys.stdout.isatty() else None)
        self.every = max(1, total // 10)

    def update(self, done: int, **values: float) -> None:
        if self.bar is not None:
            self.bar.update(done, list(values.items()))
        elif done % self.every == 0 or done == self.total:
            self.log(f"  batch {done}/{self.total}: " + ", ".join(
                f"{name} {value:.4g}" for name, value in values.items()))


class Trainer:
    """Owns the model, optimiser, checkpoints and summaries of one run directory."""

    def __init__(self, config: RunConfig, corpus: Corpus, run_dir: Path,
                 strategy: tf.distribute.Strategy | None = None,
                 log: Callable[[str], None] = print):
        self.config = config
        self.corpus = corpus
        self.run_dir = Path(run_dir)
        self.log = log
        self.strategy = strategy or make_strategy(config.train.strategy)
        self.multi_worker = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        #: only the chief writes the run directory; other workers write to a scratch one
        self.chief = is_chief(self.strategy)
        #: this process's replicas' rows of each training batch (all of them in one process)
        self.share = input_share(self.strategy)
        #: the targets of the training batches this process has built (:meth:`distribute_parts`)
        self.targets_read = 0.0
        self.files_dir = (self.run_dir if self.chief
                          else Path(tempfile.mkdtemp(prefix="tcnlm-worker-")))
        #: the run's files (read by every worker) and those this process writes
        self.run_files, self.own_files = RunDirectory(self.run_dir), RunDirectory(self.files_dir)
        if not self.chief:
            atexit.register(shutil.rmtree, self.files_dir, ignore_errors=True)
        # the chief's watch on the run directory it holds the lock of (train.run's), checked
        # around every write to it; none for a trainer made from Python without the lock
        lock = held_lock(self.run_dir) if self.chief else None
        self.watch = RunDirectoryWatch(lock) if lock is not None else None
        self.check_run_directory()
        output_layers.prepare_run(config, corpus, self.files_dir, log)
        self.num_replicas = self.strategy.num_replicas_in_sync
        train = config.train
        #: mixed_float16: dynamic loss scaling (bfloat16 has float32's range and needs none)
        self.loss_scaling = train.precision == "mixed_float16"
        keras.utils.set_random_seed(train.seed)
        self.examples = {}
        with self.strategy.scope():
            self.model: LanguageModel = build_model(config, corpus.lm_vocab, corpus.topic_vocab,
                                                    self.files_dir)
            self.tasks: list[Task] = self.model.tasks()
            self.optimizer = make_optimizer(train.optimizer, train.learning_rate)
            self.task_optimizers = {task.name: make_optimizer(train.optimizer,
                                                              train.learning_rate)
                                    for task in self.tasks}
            self._build()
        # Loop bookkeeping lives on the host, outside the strategy (plain variables).
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.batch_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.learning_rate = tf.Variable(train.learning_rate, dtype=tf.float32, trainable=False)
        self.best_valid = tf.Variable(math.inf, dtype=tf.float64, trainable=False)
        self.bad_epochs = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.checkpoint = model_checkpoint(
            self.model, optimizer=self.optimizer, epoch=self.epoch,
            **{f"optimizer_{name}": opt for name, opt in self.task_optimizers.items()},
            batch_in_epoch=self.batch_in_epoch, learning_rate=self.learning_rate,
            best_valid=self.best_valid, bad_epochs=self.bad_epochs)
        self._tidy_checkpoints()        # before the managers read the folders' state files
        # Every worker saves (saving may involve collectives); only the chief's are kept.
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.own_files.checkpoints, max_to_keep=train.keep_checkpoints)
        # two, so that a damaged newest one still leaves a best checkpoint to fall back to
        self.best_manager = tf.train.CheckpointManager(
            model_checkpoint(self.model), self.own_files.best, max_to_keep=2)
        if self.chief:      # the writer makes its folder: again, were the directory deleted
            with self._writing(made=self.run_files.tensorboard):
                self.writer = tf.summary.create_file_writer(str(self.run_files.tensorboard))
        else:
            self.writer = tf.summary.create_noop_writer()
        self.history: list[dict[str, Any]] = []
        #: one entry per train.run invocation that trained this run (tcnlm_tf.runs.provenance)
        self.provenance: list[dict[str, Any]] = []
        # Keras keeps the dropout layers' random-seed states outside model.weights
        weights = {id(w) for w in self.model.weights}
        self._seed_states = [v for v in self.model.variables if id(v) not in weights]
        self._resumed: dict[str, np.ndarray] = {}   # what resume() found beside its checkpoint
        #: the running epoch's [NLL sum, tokens, seconds] so far (zeros between epochs)
        self._epoch_totals: Callable[[], np.ndarray] = lambda: np.zeros(3)
        self._stop = StopRequests()     # fit(stop) replaces it; this one is never installed
        # in a cluster, every call that runs collectives is timed (a stuck worker ends it)
        timed = StallGuard(collective_timeout()).guard if self.multi_worker else (lambda f: f)

        def traced(function):
            # without AutoGraph: the steps have no Python control flow on tensors, and
            # converting them would cost half a second of CPU in every process that trains;
            # traced once for every batch size (tcnlm_tf.tracing)
            return timed(any_batch_size(
                tf.function(function, reduce_retracing=True, autograph=False)))

        self._traced_step = traced(self._distributed_train_step)
        self._eval_step = traced(self._distributed_eval_step)
        self._task_steps = {task.name: traced(self._task_step(task)) for task in self.tasks}
        self._task_evals = {task.name: traced(self._task_eval(task))
                            for task in self.tasks if task.validate}
        self._barrier = traced(self._distributed_barrier)

    @property
    def step(self) -> int:
        """Optimiser steps taken so far (restored by ``resume``)."""
        return int(self.optimizer.iterations.numpy())

    # ------------------------------------------------------- the run directory
    def check_run_directory(self) -> None:
        """:class:`~tcnlm_tf.runs.directory.RunDirectoryGone` when the run directory whose
        lock this process holds was deleted, moved or replaced since it took the lock
        (:class:`~tcnlm_tf.runs.directory.RunDirectoryWatch`): nothing more is written, so
        no checkpoint, ``best/`` or ``metrics.json`` appears in a directory without the
        run's configuration and vocabularies, or in another run's."""
        if self.watch is not None:
            self.watch.check()

    @contextlib.contextmanager
    def _writing(self, made: Path | None = None):
        """Around a write to the run directory that may make ``made`` (a file or folder of
        it): :meth:`check_run_directory` before and after it, also after an error of the
        write (a file or folder not found), which is then reported as the directory's loss
        where that caused it. A write whose directory was deleted under it makes the
        folders it writes to again; what it made is removed (:meth:`_unmake`)."""
        self.check_run_directory()
        try:
            yield
        finally:
            try:
                self.check_run_directory()
            except RunDirectoryGone:
                self._unmake(made)
                raise

    def _unmake(self, made: Path | None) -> None:
        """Remove ``made`` (a file or folder a write under a deleted run directory made
        again) and then the run directory, if that leaves it empty: only where the
        directory at the run's path is not the one locked, so that it holds nothing but
        what the write made (:meth:`RunDirectoryWatch.made_again`)."""
        if made is None or not self.watch.made_again():
            return
        if made.is_dir() and not made.is_symlink():
            shutil.rmtree(made, ignore_errors=True)
        else:
            made.unlink(missing_ok=True)
        with contextlib.suppress(OSError):      # not empty: left as it is
            self.run_dir.rmdir()

    def _tidy_checkpoints(self) -> None:
        """Remove from ``checkpoints/`` and ``best/`` what saves cut short left there, and
        list the complete checkpoints that their state files miss again, so that pruning
        counts them (:func:`~tcnlm_tf.runs.checkpoints.tidy_checkpoints`; in
        ``checkpoints/``, a ``resume-state-<step>.npz`` without its checkpoint goes too).
        Only where this process holds the run lock, so that no other process is writing
        there."""
        if self.watch is None:
            return
        with self._writing():
            tidy_checkpoints(self.run_files.checkpoints, self.log, companions=RESUME_STATE)
            tidy_checkpoints(self.run_files.best, self.log)

    # ------------------------------------------------------------------ data
    @property
    def uses_state(self) -> bool:
        """Whether each batch continues the previous one's lanes (:func:`carries_state`)."""
        return carries_state(self.config)

    def dataset(self, split: str, shuffle_seed: int | None = None,
                with_documents: bool = False,
                share: pipeline.Share | None = None) -> tf.data.Dataset:
        """The batches of ``split`` for this run's mode (global batch size; with
        ``with_documents``, each target's ``document`` too; with a ``share``, a tuple of
        this process's replicas' rows of each, :class:`~tcnlm_tf.data.pipeline.Share`)."""
        arrays = self.corpus.splits[split]
        if self.config.model.mode == "sentence" and split not in self.examples:
            self.examples[split] = pipeline.sentence_examples(arrays, self.config.data.seq_len)
        return pipeline.model_dataset(self.model, self.config, arrays, split,
                                      shuffle_seed=shuffle_seed,
                                      examples=self.examples.get(split),
                                      with_documents=with_documents, share=share)

    def distribute(self, dataset: Iterable[dict]) -> Iterator:
        """The global batches of ``dataset``, each split among the replicas (a generator):
        for evaluation and the further tasks' batches, which every worker builds whole,
        keeping its own replicas' slices of each (:func:`replica_slice`), exactly what one
        process would compute (the language model's training batches are built per worker:
        :meth:`distribute_parts`). ``strategy.experimental_distribute_dataset`` would do the
        same, but each of its iterators (one per epoch and per evaluation) waits, when
        deleted, for tf.data's
        autotuning thread to wake from its sleep, which grows to a minute: measured 0-20 s
        after the last batch of an epoch on the synthetic corpus (32 units), a third of
        ``make demo``'s wall time, and its input threads cut the training tokens/s by a
        third on 2 cores. A plain iterator has neither cost."""
        for batch in dataset:
            yield self.strategy.experimental_distribute_values_from_function(
                functools.partial(replica_slice, batch))

    def distribute_parts(self, dataset: Iterable[tuple[dict, ...]]) -> Iterator:
        """The batches of a dataset built with :attr:`share` (a tuple of this process's
        replicas' batches each), each replica given its own (a generator)."""
        first = self.share.first
        for parts in dataset:
            if self.multi_worker:       # logged at the epoch's end (train_epoch)
                self.targets_read += sum(float(part["weights"].numpy().sum())
                                         for part in parts)
            yield self.strategy.experimental_distribute_values_from_function(
                lambda context, parts=parts: parts[context.replica_id_in_sync_group - first])

    def _build(self) -> None:
        """Create every variable (model, tasks and optimisers) so checkpoints can be restored."""
        batch = next(iter(self.dataset("valid").take(1)))
        self.model(batch, training=False)
        for task in self.tasks:
            dataset = task.batches("train", self.corpus.splits["train"],
                                   self.config.train.batch_size, None)
            task.loss_terms(next(iter(dataset.take(1))), False)
            self.task_optimizers[task.name].build(task.variables())
        if self.loss_scaling:
            # Only the inner optimiser is checkpointed, so checkpoints are the same under
            # every precision; the loss scale starts again at 2^15 on --resume and settles
            # within a few steps (each step that overflows halves it and is skipped).
            self.scaled_optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            self.scaled_optimizer.build(self.model.trainable_variables)
        else:
            self.optimizer.build(self.model.trainable_variables)

    def prepare(self) -> None:
        """The model's one-off work for a fresh run (:meth:`LanguageModel.prepare`)."""
        with self._writing():
            self.model.prepare(self.corpus, self.files_dir, self.log)

    # ----------------------------------------------------------------- steps
    def train_step(self, batch, state, due: tf.Tensor,
                   stop: tf.Tensor | None = None) -> tuple[dict, Any]:
        """One optimiser step of the language model on ``batch`` (a batch of
        :meth:`distribute`'s dataset), in the traced ``tf.function``: forward pass from
        ``state`` (in document mode the state carried from the previous batch, zeros at
        the epoch's start; else None), backward pass, gradients all-reduced over the
        replicas and clipped to ``clip_norm``, optimiser update. ``due`` is a float scalar
        tensor, 1.0 where this worker's clock says a checkpoint is due, else 0.0; ``stop``
        the same where this worker was asked to stop (default 0.0).

        Returns ``(sums, state)``: ``sums`` holds the step's scalars summed over the replicas
        (``nll_sum``, ``tokens``, ``examples``, ``aux_loss``, the dict ``aux_metrics``,
        ``grad_norm``, ``due``, ``stop``), and ``state`` is the per-replica state to carry into
        the next batch (used only when :attr:`uses_state`). Further training tasks have steps
        of their own, which :meth:`train_epoch` runs."""
        return self._traced_step(batch, state, due,
                                 tf.constant(0.0) if stop is None else stop)

    def _replica_train_step(self, batch, state, due, stop):
        ctx = tf.distribute.get_replica_context()
        variables = self.model.trainable_variables
        # mixed_float16: the gradients stay multiplied by the loss scale L (the optimiser
        # checks them for overflow and divides by L itself), so the clip threshold and the
        # reported norm are scaled by L instead of every gradient twice
        scale = self.scaled_optimizer.dynamic_scale.value if self.loss_scaling else 1.0
        with tf.GradientTape() as tape:
            terms = self.model.loss_terms(batch, training=True, state=state)
            tokens = ctx.all_reduce(SUM, terms["tokens"])
            loss = (terms["nll_sum"] + terms["aux_loss"]) / tf.maximum(tokens, 1.0) * scale
        grads = ctx.all_reduce(SUM, [_dense(g, v) for g, v in
                                     zip(tape.gradient(loss, variables), variables)])
        grads, scaled_norm = clip_gradients(grads, self.model.weight_scales(variables),
                                            self.config.train.clip_norm * scale)
        grad_norm = scaled_norm / scale
        optimizer = self.scaled_optimizer if self.loss_scaling else self.optimizer
        optimizer.apply([g / self.num_replicas for g in grads], variables)
        return {"nll_sum": terms["nll_sum"], "tokens": terms["tokens"],
                "examples": terms["examples"], "aux_loss": terms["aux_loss"],
                "aux_metrics": terms["aux_metrics"], "grad_norm": grad_norm,
                "due": tf.identity(due), "stop": tf.identity(stop), "state": terms["state"]}

    def _task_step(self, task: Task) -> Callable:
        """The distributed training step of a further task: its summed loss divided by the
        global count, gradients all-reduced (and clipped when the task asks), its optimiser."""
        optimizer = self.task_optimizers[task.name]

        def replica_step(batch):
            ctx = tf.distribute.get_replica_context()
            variables = task.variables()
            with tf.GradientTape() as tape:
                terms = task.loss_terms(batch, True)
                count = ctx.all_reduce(SUM, terms["count"])
                loss = terms["loss_sum"] / tf.maximum(count, 1.0)
            grads = ctx.all_reduce(SUM, [_dense(g, v) for g, v in
                                         zip(tape.gradient(loss, variables), variables)])
            if task.clip:
                grads, _ = clip_gradients(grads, self.model.weight_scales(variables),
                                          self.config.train.clip_norm)
            optimizer.apply([g / self.num_replicas for g in grads], variables)
            return {"loss_sum": terms["loss_sum"], "count": terms["count"],
                    "metrics": terms.get("metrics", {})}

        return lambda batch: self._reduce(self.strategy.run(replica_step, args=(batch,)))

    @staticmethod
    def _task_eval(task: Task) -> Callable:
        """A further task's loss terms on one batch, without training."""
        return lambda batch: task.loss_terms(batch, False)

    def _distributed_train_step(self, batch, state, due, stop):
        """One language-model step; ``due`` (1.0 where this worker's clock says a checkpoint
        is due) and ``stop`` (1.0 where this worker was asked to stop) come back summed over
        the replicas, so every worker decides alike."""
        out = self.strategy.run(self._replica_train_step, args=(batch, state, due, stop))
        return self._reduce(out), out["state"]

    def _replica_eval_step(self, batch, state):
        terms = self.model.loss_terms(batch, training=False, state=state)
        return {key: terms[key] for key in ("nll_sum", "tokens", "target_nll", "state")}

    def _distributed_eval_step(self, batch, state):
        """The summed NLL and tokens of one global batch, every target's NLL [B, L] (the
        replicas' rows gathered back in order) and the new state."""
        out = self.strategy.run(self._replica_eval_step, args=(batch, state))
        sums = self._reduce({key: out[key] for key in ("nll_sum", "tokens")})
        sums["target_nll"] = self.strategy.gather(out["target_nll"], axis=0)
        return sums, out["state"]

    def _distributed_barrier(self, value=None):
        """An all-reduce of ``value`` (default 1.0), a float scalar: returns its sum over
        the replicas of every worker once every worker has reached it."""
        value = tf.ones([]) if value is None else value
        # the replica's own copy: all_reduce sends a tensor to the device it lives on, and a
        # tensor made outside strategy.run (or a function's input) names none
        return self.strategy.run(
            lambda: tf.distribute.get_replica_context().all_reduce(SUM, tf.identity(value)))

    def barrier(self) -> None:
        """Wait for the other workers (multi-worker only), e.g. for the chief's files."""
        if self.multi_worker:
            self._barrier()

    def stop_agreed(self) -> bool:
        """Whether any worker was asked to stop (every worker calls this at the same point
        and gets the same answer; one process needs no collective)."""
        if not self.multi_worker:
            return self._stop.requested
        total = self._barrier(tf.constant(float(self._stop.requested)))
        return float(self.strategy.experimental_local_results(total)[0]) > 0

    def check_weights(self) -> None:
        """:class:`NonFiniteLoss` naming the first weight that is not all finite: such
        weights are never saved, and the newest checkpoint stays the last good state."""
        bad = next((v.path for v in self.model.weights
                    if not bool(tf.reduce_all(tf.math.is_finite(v)))), None)
        if bad is not None:
            raise NonFiniteLoss(self.step, {"weights": bad}, tf.train.latest_checkpoint(
                str(self.own_files.checkpoints)))

    def save(self, manager: tf.train.CheckpointManager, checked: bool = False) -> None:
        """Every worker saves (saving may involve collectives); a worker other than the chief
        saves to its scratch directory and deletes it again (TensorFlow's multi-worker
        recipe). Weights that are not all finite are never saved (:meth:`check_weights`,
        unless the caller just did: ``checked``), nor into a run directory that is gone
        (:meth:`check_run_directory`, before and after the save)."""
        if not checked:
            self.check_weights()
        with self._writing(made=Path(manager.directory)):
            try:
                with quiet_pruning():
                    manager.save(checkpoint_number=self.step)
            except tf.errors.OpError as error:     # a full disk, a lost mount, permissions
                raise UserError(f"could not write a checkpoint in {manager.directory} at "
                                f"step {self.step}: {error.message.splitlines()[0]}; the "
                                "newest complete checkpoint is kept: free space and "
                                "--resume") from None
        if not self.chief:
            shutil.rmtree(manager.directory, ignore_errors=True)

    def _reduce(self, out: dict) -> dict:
        """Sum every per-replica scalar (nested dicts too) except the carried state."""
        return {key: (self._reduce(value) if isinstance(value, dict)
                      else self.strategy.reduce(SUM, value, axis=None))
                for key, value in out.items() if key not in ("state",)}

    # ------------------------------------------------------------ evaluation
    def evaluate(self, split: str) -> tuple[float, float]:
        """Total NLL and number of predicted tokens of ``split`` (dropout off)."""
        return self.evaluate_documents(split)[:2]

    def evaluate_documents(self, split: str) -> tuple[float, float, np.ndarray, np.ndarray]:
        """:meth:`evaluate` of ``split`` with each document's share: total NLL, predicted
        tokens, and NLL [D] and predicted tokens [D] of each of its D documents (a document
        without targets: 0 and 0)."""
        documents = self.corpus.splits[split].num_documents
        nll, tokens = np.zeros(documents), np.zeros(documents, np.int64)
        owners: list[np.ndarray] = []

        def batches():
            for batch in self.dataset(split, with_documents=True):
                owners.append(batch.pop("document").numpy())
                yield batch

        def step(batch, state):
            sums, new_state = self._eval_step(batch, state)
            owner = owners.pop(0)
            kept = owner >= 0
            np.add.at(nll, owner[kept], sums["target_nll"].numpy()[kept])
            tokens[:] += np.bincount(owner[kept], minlength=documents)
            return sums, new_state

        total_nll, total_tokens = summed_nll(step, self.distribute(batches()),
                                             self._zero_lanes if self.uses_state else None)
        return total_nll, total_tokens, nll, tokens

    def evaluate_perplexity(self, split: str) -> float:
        return perplexity(*self.evaluate(split))

    def evaluate_tasks(self, split: str) -> dict[str, float]:
        """Loss and metrics (per count) of the tasks that ask to be validated, on ``split``:
        ``{"<task>_loss": ..., "<task>_<metric>": ...}`` (tasks without data there left out)."""
        results = {}
        for task in (t for t in self.tasks if t.validate):
            dataset = task.batches(split, self.corpus.splits[split],
                                   self.config.train.batch_size, None)
            sums: dict[str, float] = {}
            for batch in dataset:
                terms = self._task_evals[task.name](batch)
                for name, value in [("loss", terms["loss_sum"]), ("count", terms["count"]),
                                    *terms.get("metrics", {}).items()]:
                    sums[name] = sums.get(name, 0.0) + float(value)
            count = sums.pop("count", 0.0)
            if count:
                results.update({f"{task.name}_{name}": value / count
                                for name, value in sums.items()})
        return results

    # -------------------------------------------------------------- training
    def resume(self, learning_rate: float | None = None) -> bool:
        """Restore the latest checkpoint; False when the run has none. ``learning_rate``
        replaces the restored (possibly decayed) learning rate, e.g. after a non-finite
        loss."""
        self.barrier()                  # the chief has tidied its checkpoints (__init__)
        self.check_run_directory()
        # the chief's checkpoints, on every worker; a checkpoint whose resume state is
        # damaged is passed over for the next older one, as a damaged checkpoint is
        saved: dict[str, dict[str, np.ndarray]] = {}
        latest = restore_newest_readable(
            self.checkpoint, self.run_files.checkpoints, self.log,
            check=lambda: saved.update(arrays=self._read_resume_state()))
        if latest is None:
            return False
        self._resumed = self._restore_resume_state(saved["arrays"])
        if learning_rate is not None:
            self.learning_rate.assign(learning_rate)
            self.log(f"learning rate set to {learning_rate:g} (--learning-rate)")
        self._set_learning_rate()
        self._read_history()
        self.log(f"resumed from {latest}: epoch {int(self.epoch) + 1}, batch "
                 f"{int(self.batch_in_epoch)}, step {self.step}")
        return True

    def _read_history(self) -> None:
        """The epoch history and provenance of a resumed run from its ``metrics.json``; a
        damaged one (not JSON, not an object, no list of epochs) is one line naming it,
        since rewriting it would lose the history for good; a missing one after a finished
        epoch is a notice, as the run goes on from the checkpoint's weights without it."""
        metrics = self.run_files.metrics
        if not metrics.is_file():
            epochs = int(self.epoch)
            if epochs:
                self.log(f"note: {metrics} is gone: the history of the run's {epochs} "
                         f"finished epoch{'s' * (epochs > 1)} is lost (the checkpoint holds "
                         "the weights); resuming, and metrics.json lists the epochs from here "
                         "on")
            return
        saved = read_json_object(metrics, RESTORE_METRICS)
        if not isinstance(saved.get("epochs"), list):
            raise UserError(f"{metrics} has no list of epochs: {RESTORE_METRICS}")
        self.history = saved["epochs"]
        self.provenance = saved.get("provenance", [])

    def _set_learning_rate(self) -> None:
        """Every optimiser follows the run's (decayed) learning rate."""
        for optimizer in [self.optimizer, *self.task_optimizers.values()]:
            optimizer.learning_rate.assign(self.learning_rate)

    def fit(self, stop: StopRequests | None = None) -> str:
        """Train until ``epochs``, early stopping, ``max_steps`` or a request in ``stop``
        (an active :class:`train.stopping.StopRequests`; honoured with a checkpoint after
        the language-model step under way, before the validation of an epoch whose last step
        it came during, or after the validation under way); returns why it stopped:
        ``'epochs'``, ``'early_stopping'``, ``'max_steps'`` or ``'interrupted'``."""
        train = self.config.train
        self._stop = stop or StopRequests()
        self.check_run_directory()
        write_hparams(self.writer, self.config, self.run_dir.name)
        while int(self.epoch) < train.epochs:
            if int(self.bad_epochs) >= train.patience:    # resumed after it stopped early
                return "early_stopping"
            if train.max_steps is not None and self.step >= train.max_steps:
                self.log(f"already at {self.step} steps (--max-steps {train.max_steps}): "
                         "nothing to train; give a larger --max-steps to continue")
                return "max_steps"
            ended = self.train_epoch()
            if ended != "ended":
                if ended == "max_steps":
                    self.log(f"stopped after {self.step} steps (--max-steps); checkpoint "
                             f"in {self.manager.directory}; continue with --resume")
                return ended
            if self.end_epoch():
                return "early_stopping"
            if self.stop_agreed():          # asked during the validation; end_epoch saved
                return "interrupted"
        return "epochs"

    def _epoch_plan(self, epoch: int,
                    skip: int = 0) -> tuple[list[tf.data.Dataset], np.ndarray]:
        """The epoch's datasets (the language model's first, then each task's) and the order
        of their batches: index k of ``order`` says which dataset gives batch k. Batches of
        ``"shuffled"`` tasks are shuffled among the language model's; ``"after"`` tasks follow.
        With ``skip`` (a resumed epoch), the language model's dataset begins after its
        batches among the first ``skip`` of the order, never building them; the tasks'
        datasets (a few batches of documents) begin at their first batch."""
        train, arrays = self.config.train, self.corpus.splits["train"]
        seed = train.seed * 1000 + epoch
        datasets = [self.dataset("train", shuffle_seed=seed, share=self.share)]
        datasets += [task.batches("train", arrays, train.batch_size, seed + 1 + k)
                     for k, task in enumerate(self.tasks)]
        counts = [int(d.cardinality()) for d in datasets]
        shuffled = [np.full(counts[0], 0)] + [np.full(counts[k + 1], k + 1)
                                              for k, t in enumerate(self.tasks)
                                              if t.order == "shuffled"]
        order = np.concatenate(shuffled)
        if self.tasks:
            order = np.random.default_rng(seed).permutation(order)
        after = [np.full(counts[k + 1], k + 1) for k, t in enumerate(self.tasks)
                 if t.order == "after"]
        order = np.concatenate([order] + after).astype(np.int64)
        trained = int((order[:skip] == 0).sum())
        if trained:
            datasets[0] = self.dataset("train", shuffle_seed=seed,
                                       share=dataclasses.replace(self.share, start=trained))
        return datasets, order

    def train_epoch(self) -> str:
        """Train the current epoch (from its checkpointed batch when resumed): every batch of
        the language model (:meth:`train_step`) and of the further tasks, in the epoch's
        order, with the progress line, the ``train/*`` scalars every ``log_every`` steps and
        a checkpoint when one is due (:class:`NonFiniteLoss` where a step's loss or gradient
        norm is not finite); sets :attr:`epoch_summary` (train loss, seconds, tokens/s, each
        task's loss) at the end. Neither validates nor advances ``epoch``: :meth:`end_epoch`
        does. Returns ``'ended'`` when the epoch ran to its end, ``'max_steps'`` or
        ``'interrupted'`` when ``max_steps`` or a stop request (on any worker) ended it after
        a language-model step, or after its last batch when the request came during that
        step or the further tasks' batches after it (a training checkpoint saved,
        :attr:`epoch_summary` left as it was)."""
        train = self.config.train
        epoch = int(self.epoch)
        skip = int(self.batch_in_epoch)
        datasets, order = self._epoch_plan(epoch, skip)
        num_batches = len(order)
        done = np.bincount(order[:skip], minlength=len(datasets))
        iterators = [self.distribute_parts(datasets[0])]
        iterators += [self.distribute(d.skip(int(n))) for d, n in zip(datasets[1:], done[1:])]
        progress = Progress(num_batches, self.log, [f"{t.name}_loss" for t in self.tasks])
        self.log(f"epoch {epoch + 1}/{train.epochs} ({num_batches} batches"
                 + "".join(f", {int((order == k + 1).sum())} of them {task.name}"
                           for k, task in enumerate(self.tasks)) + ")")
        window = {"nll": 0.0, "tokens": 0.0, "start": time.perf_counter()}
        task_sums = {task.name: [0.0, 0.0] for task in self.tasks}   # loss, count: window
        task_epoch = {task.name: [0.0, 0.0] for task in self.tasks}
        # a resumed epoch goes on from the sums its checkpoint saved (all zero for a fresh
        # epoch, or a checkpoint of an earlier version), so its summary covers the whole epoch
        epoch_nll, epoch_tokens, seconds_before = (
            self._resumed.get("epoch_totals", np.zeros(3)) if skip else np.zeros(3)).tolist()
        epoch_start = time.perf_counter() - seconds_before
        self._epoch_totals = lambda: np.array(
            [epoch_nll, epoch_tokens, time.perf_counter() - epoch_start])
        state = self._lane_state(self._resumed) if skip and self.uses_state else None
        self.targets_read = 0.0
        shown = {}
        last_checkpoint = time.monotonic()
        for index in range(skip, num_batches):
            source = int(order[index])
            batch = next(iterators[source])
            self.batch_in_epoch.assign(index + 1)
            if source:
                task = self.tasks[source - 1]
                out = self._task_steps[task.name](batch)
                self._check_finite(self.step, **{task.name: out["loss_sum"]})
                for totals in (task_sums[task.name], task_epoch[task.name]):
                    totals[0] += float(out["loss_sum"])
                    totals[1] += float(out["count"])
                shown[f"{task.name}_loss"] = (task_epoch[task.name][0]
                                              / max(task_epoch[task.name][1], 1.0))
                progress.update(index + 1, **shown)
                continue
            stop = self._stop.requested
            due = stop or (bool(train.checkpoint_minutes) and (
                time.monotonic() - last_checkpoint >= 60 * train.checkpoint_minutes))
            if self.uses_state and state is None:
                state = self._zero_lanes(batch)
            sums, new_state = self.train_step(batch, state, tf.constant(float(due)),
                                              tf.constant(float(stop)))
            state = new_state if self.uses_state else None
            step = self.step
            # under loss scaling a non-finite gradient is an overflow the step skipped
            self._check_finite(step, nll=sums["nll_sum"], aux=sums["aux_loss"],
                               **({} if self.loss_scaling else {"gradient": sums["grad_norm"]}))
            nll, tokens = float(sums["nll_sum"]), float(sums["tokens"])
            epoch_nll += nll
            epoch_tokens += tokens
            window["nll"] += nll
            window["tokens"] += tokens
            shown.update(loss=nll / max(tokens, 1.0),
                         ppl=perplexity(epoch_nll, max(epoch_tokens, 1.0)),
                         lr=float(self.learning_rate),
                         tokens_per_sec=epoch_tokens / (time.perf_counter() - epoch_start))
            progress.update(index + 1, **shown)
            if step % train.log_every == 0:
                self._log_train_window(step, window, sums, task_sums)
            if train.max_steps is not None and step >= train.max_steps:
                self._log_partial_window(window, sums, task_sums)
                self._save_training(state)
                return "max_steps"
            if float(sums["due"]) > 0:
                self._save_training(state)
                last_checkpoint = time.monotonic()
            if float(sums["stop"]) > 0:
                self._log_partial_window(window, sums, task_sums)
                return "interrupted"
        if window["tokens"]:
            self._log_partial_window(window, sums, task_sums)
        if self.stop_agreed():   # asked during the last step or the task batches after it:
            self._save_training(state)      # resumed, the epoch goes straight to validation
            return "interrupted"
        elapsed = time.perf_counter() - epoch_start
        if self.multi_worker:
            trained = epoch_tokens - (self._resumed.get("epoch_totals", np.zeros(3))[1]
                                      if skip else 0.0)
            self.log(f"input pipeline {self.share.first // self.share.local + 1} of "
                     f"{self.share.total // self.share.local} read {self.targets_read:.0f} of "
                     f"the {trained:.0f} targets trained on in this epoch"
                     + (f" since batch {skip}" if skip else ""))
        self.epoch_summary = {"train_loss": epoch_nll / max(epoch_tokens, 1.0),
                              "seconds": elapsed, "tokens_per_sec": epoch_tokens / elapsed,
                              **{f"{name}_loss": loss / max(count, 1.0)
                                 for name, (loss, count) in task_epoch.items()}}
        return "ended"

    # ------------------------------------------- checkpoints and the state beside them
    def _save_training(self, state=None) -> None:
        """A training checkpoint, with ``resume-state-<step>.npz`` beside it (written
        atomically first, removed with its checkpoint): the dropout layers' random-seed
        states and that of the seed generator of the posterior samples (Keras keeps them
        outside ``model.weights``), the running epoch's NLL sum, tokens and seconds (so a
        resumed epoch reports all its batches) and, where the state is carried (document
        and stream mode, sentence mode with ``--long-sentences carry``), the lanes' LSTM
        state ``state``. With the seeds and the lanes, a run resumed from any checkpoint
        ends at exactly the weights of one that never stopped."""
        self.check_weights()            # before anything of this checkpoint is written
        if self.chief and not self.multi_worker:
            arrays = {f"seed_{i}": v.numpy() for i, v in enumerate(self._seed_states)}
            arrays["epoch_totals"] = self._epoch_totals()  # the epoch's NLL, tokens, seconds
            if state is not None:
                arrays.update({f"lane_{i}": np.concatenate(
                    [t.numpy() for t in self.strategy.experimental_local_results(value)])
                    for i, value in enumerate(tf.nest.flatten(state))})
            with self._writing(made=self.own_files.checkpoints):
                atomic_write(self.own_files.resume_state(self.step),
                             lambda f: np.savez(f, **arrays))
        self.save(self.manager, checked=True)
        if self.chief:
            kept = {Path(prefix).name.rsplit("-", 1)[-1] for prefix in self.manager.checkpoints}
            for path in self.own_files.resume_states():
                if path.stem.rsplit("-", 1)[-1] not in kept:
                    path.unlink(missing_ok=True)    # gone already: the next write says why

    def _read_resume_state(self) -> dict[str, np.ndarray] | None:
        """The arrays of ``resume-state-<step>.npz`` beside the checkpoint just restored,
        or None when there is none; a ``ValueError`` naming the file when it is damaged
        (truncated, not an npz, an unreadable array, or random-stream states whose shape or
        dtype is not that of this model's, which assigning them would fail on)."""
        path = self.run_files.resume_state(self.step)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as saved:
                arrays = {name: saved[name] for name in saved.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise ValueError(f"{path.name} is damaged ({err})") from None
        if sum(name.startswith("seed_") for name in arrays) == len(self._seed_states):
            for i, variable in enumerate(self._seed_states):
                array, current = arrays.get(f"seed_{i}"), variable.numpy()
                if array is None or (array.shape, array.dtype) != (current.shape, current.dtype):
                    raise ValueError(f"{path.name} is damaged (its seed_{i} is not a "
                                     f"{current.dtype} array of shape {current.shape})")
        return arrays

    def _restore_resume_state(self, arrays: dict[str, np.ndarray] | None
                              ) -> dict[str, np.ndarray]:
        """Set the seed states from the ``arrays`` saved with the checkpoint just restored
        (:meth:`_read_resume_state`); returns them (the lanes' state among them), or {}
        with a notice when there are none (a multi-worker run, or a checkpoint of an
        earlier version)."""
        path = self.run_files.resume_state(self.step)
        if arrays is None:
            self.log(f"note: no {path.name} beside the checkpoint: dropout masks (and, in "
                     "document and stream mode, the lanes' state) restart, so the run will "
                     "not end at exactly the weights of an uninterrupted one")
            return {}
        seeds = sorted(name for name in arrays if name.startswith("seed_"))
        if len(seeds) != len(self._seed_states):
            self.log(f"note: {path.name} holds {len(seeds)} random-stream states and this "
                     f"model has {len(self._seed_states)} (an earlier version's checkpoint): "
                     "the random streams restart, so the run will not end at exactly the "
                     "weights of an uninterrupted one")
            return arrays
        for i, variable in enumerate(self._seed_states):
            variable.assign(arrays[f"seed_{i}"])
        return arrays

    def _zero_lanes(self, batch):
        """Each replica's zero state for its rows of ``batch`` (a distributed batch): where
        a stateful epoch or evaluation starts. Given as a state rather than None, so that
        the steps are traced once (:mod:`tcnlm_tf.tracing`)."""
        return self.strategy.run(zero_lanes(self.model), args=(batch,))

    def _lane_state(self, arrays: dict[str, np.ndarray]):
        """The carried state in ``arrays`` (from :meth:`_restore_resume_state`), each
        replica's rows, or None (zeros) when it holds none."""
        lanes = sorted((name for name in arrays if name.startswith("lane_")),
                       key=lambda name: int(name.split("_")[1]))
        if not lanes:
            return None
        flat = [tf.constant(arrays[name]) for name in lanes]
        state = tf.nest.pack_sequence_as(self.model.zero_state(1), flat)
        return self.strategy.experimental_distribute_values_from_function(
            functools.partial(replica_slice, state))

    def _check_finite(self, step: int, **terms: tf.Tensor) -> None:
        """Stop training with :class:`NonFiniteLoss` when a loss term or the gradient norm of
        the step just taken is NaN or infinite. Nothing is saved after such a step: the newest
        checkpoint is the last good state."""
        bad = {name: float(value) for name, value in terms.items()
               if not math.isfinite(float(value))}
        if bad:
            raise NonFiniteLoss(step, bad, tf.train.latest_checkpoint(
                str(self.own_files.checkpoints)))

    def _log_train_window(self, step: int, window: dict, sums: dict,
                          task_sums: dict[str, list[float]]) -> None:
        """The ``train/*`` scalars of the steps in ``window`` (the run directory checked
        first: TensorBoard writes into a deleted file without a word)."""
        self.check_run_directory()
        elapsed = time.perf_counter() - window["start"]
        loss = window["nll"] / max(window["tokens"], 1.0)
        with self.writer.as_default(step=step):
            tf.summary.scalar("train/loss", loss)
            tf.summary.scalar("train/perplexity", math.exp(min(loss, 50.0)))
            tf.summary.scalar("train/learning_rate", float(self.learning_rate))
            tf.summary.scalar("train/tokens_per_sec", window["tokens"] / max(elapsed, 1e-9))
            tf.summary.scalar("train/grad_norm", float(sums["grad_norm"]))
            examples = max(float(sums["examples"]), 1.0)
            for name, value in sums["aux_metrics"].items():
                tf.summary.scalar(f"train/{name}", float(value) / examples)
            for name, totals in task_sums.items():
                if totals[1]:
                    tf.summary.scalar(f"train/{name}_loss", totals[0] / totals[1])
                totals[:] = [0.0, 0.0]
        window.update(nll=0.0, tokens=0.0, start=time.perf_counter())

    def _log_partial_window(self, window: dict, sums: dict,
                            task_sums: dict[str, list[float]]) -> None:
        """The ``train/*`` scalars of the steps since the last ``--log-every`` point, at the
        end of an epoch or of training, so that no step goes unlogged (a run shorter than
        ``--log-every`` steps had none)."""
        if window["tokens"]:
            self._log_train_window(self.step, window, sums, task_sums)
            self.writer.flush()

    def end_epoch(self) -> bool:
        """Close the epoch :meth:`train_epoch` trained: the validation perplexity (a
        non-finite one raises :class:`NonFiniteLoss`) and the tasks' validation, logged to
        TensorBoard; the best weights saved when the perplexity improved, else, from
        ``lr_decay_start`` on, the learning rate decayed and a bad epoch counted; the epoch's
        history entry and the metrics written, ``epoch`` advanced and a training checkpoint
        saved. Returns True when early stopping says training should stop (``patience`` bad
        epochs since the last improvement), else False."""
        train = self.config.train
        epoch = int(self.epoch) + 1
        valid_ppl = self.evaluate_perplexity("valid")
        if not math.isfinite(valid_ppl):      # a run that diverged ends here, never as "best"
            raise NonFiniteLoss(self.step, {"valid": valid_ppl}, tf.train.latest_checkpoint(
                str(self.own_files.checkpoints)))
        valid_tasks = self.evaluate_tasks("valid")
        step = self.step
        with self.writer.as_default(step=step):
            tf.summary.scalar("valid/perplexity", valid_ppl)
            for name, value in valid_tasks.items():
                tf.summary.scalar(f"valid/{name}", value)
        self.writer.flush()
        if self.chief and has_topics(self.model):
            write_topics(self.writer, model_top_words(self.model, self.corpus.lm_vocab,
                                                      self.corpus.topic_vocab, TOP_WORDS), step)
        improved = valid_ppl < float(self.best_valid)
        if improved:
            self.best_valid.assign(valid_ppl)
            self.bad_epochs.assign(0)
            self.save(self.best_manager)
        elif epoch >= train.lr_decay_start:
            self.bad_epochs.assign_add(1)
            self.learning_rate.assign(self.learning_rate * train.lr_decay)
            self._set_learning_rate()
        self.history.append({"epoch": epoch, "step": step, "valid_perplexity": valid_ppl,
                             "learning_rate": float(self.learning_rate), **self.epoch_summary,
                             **{f"valid_{name}": value for name, value in valid_tasks.items()}})
        self.epoch.assign(epoch)
        self.batch_in_epoch.assign(0)
        self._save_training()
        # a run trained on past an earlier end (a larger --epochs with --resume) no longer
        # has the weights its test perplexity and stop reason were for: they go until it ends
        self.write_metrics(without=TESTED + ("stopped",))
        tasks = "".join(f", {task.name} loss {self.epoch_summary[task.name + '_loss']:.4f}"
                        for task in self.tasks)
        self.log(f"epoch {epoch}: train loss {self.epoch_summary['train_loss']:.4f}{tasks}, "
                 f"valid perplexity {valid_ppl:.2f}{' (best)' if improved else ''}, "
                 f"{self.epoch_summary['tokens_per_sec']:.0f} tokens/s")
        stop = int(self.bad_epochs) >= train.patience
        if stop:
            self.log(f"early stopping: no improvement for {train.patience} epochs")
        return stop

    def restore_best(self) -> None:
        """Load the weights with the best validation perplexity (if any epoch finished)."""
        self.barrier()   # the chief has written best/
        self.check_run_directory()      # a best/ that is gone with it restores nothing
        restore_newest_readable(model_checkpoint(self.model), self.run_files.best, self.log)

    def write_metrics(self, without: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
        """Write ``metrics.json`` (history, best validation perplexity, any ``extra``, less
        the keys ``without`` that an earlier write left; the chief only) and return its
        contents; a damaged one (not JSON, not an object) is one line naming it."""
        path = self.run_files.metrics
        with self._writing():
            metrics = read_json_object(path, RESTORE_METRICS) if path.is_file() else {}
        for key in without:
            metrics.pop(key, None)
        train_tokens = self.corpus.splits["train"].num_predicted_tokens(self.config.data.line_end)
        metrics.update({"dataset": self.config.data.dataset, "model": self.config.model.model,
                        "mode": self.config.model.mode, "epochs": self.history,
                        "steps": self.step, "train_tokens_per_epoch": train_tokens,
                        "best_valid_perplexity": (None if math.isinf(float(self.best_valid))
                                                  else float(self.best_valid))})
        if self.provenance:
            metrics["provenance"] = self.provenance
        metrics.update(extra)
        if self.chief:
            with self._writing(made=path):
                write_text(path, json.dumps(metrics, indent=2) + "\n")
        return metrics

    def log_test_perplexity(self, value: float) -> None:
        """The test perplexity ``value`` of the model's weights to TensorBoard and, from the
        chief, those weights' embeddings (and topics) for its projector."""
        with self.writer.as_default(step=self.step):
            tf.summary.scalar("test/perplexity", value)
        self.writer.flush()
        if self.chief:
            with self._writing(made=self.run_files.tensorboard):
                write_projector(self.run_files.tensorboard, projector_tables(
                    self.model, self.corpus.lm_vocab, self.corpus.topic_vocab), self.step)


def make_optimizer(name: str, learning_rate: float) -> keras.optimizers.Optimizer:
    """``adam`` (the topic-model papers) or plain ``sgd`` without momentum (the PyTorch
    word-language-model example that the SDLM paper trains with: lr 20, clip 0.25)."""
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate=learning_rate)
    return keras.optimizers.Adam(learning_rate=learning_rate)


def count_parameters(model: keras.Model) -> int:
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))
