"""``python -m train.run``: train a language model and report its test perplexity.

With no arguments it trains the basic LSTM on the embedded synthetic corpus and prints the
unigram, LSTM and oracle test perplexities side by side. ``--dataset bnc`` (or ``apnews``,
``imdb``) reads ``<data-dir>/<dataset>/{train,valid,test}.txt`` in the TDLM format.
Everything a run produces goes to ``runs/<name>/``: ``config.json``, the vocabularies,
``checkpoints/``, ``best/``, ``tensorboard/`` and ``metrics.json``.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from tcnlm_tf.cli.command_line import (build_parser, config_from_args, config_from_file,
                                       corpus_note, resumed_config)
from tcnlm_tf.config import RunConfig
from tcnlm_tf.data.loading import load_corpus
from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.precision import warn_if_slow
from tcnlm_tf.runs import provenance
from tcnlm_tf.runs.directory import RunDirectory
from tcnlm_tf.runs.lock import RunLock, holder, try_lock


def choose_run_dir(args: argparse.Namespace, config: RunConfig, claim: bool = False
                   ) -> tuple[Path, RunLock | None]:
    """``--runs-dir/--run-name`` and, with ``claim``, this process's lock on it
    (:mod:`tcnlm_tf.runs.lock`). A fresh run never overwrites one with checkpoints, nor one
    that another process holds: it gets the next free ``-2``, ``-3``... suffix (printed)."""
    default = f"{config.data.dataset}-{config.model.model}"
    if config.model.mode != "sentence":
        default += f"-{config.model.mode}"
    base = args.runs_dir / (args.run_name or default)
    run_dir, n = base, 1
    while True:
        if not RunDirectory(run_dir).has_checkpoint():
            lock = try_lock(run_dir) if claim else None
            if lock is not None or not claim:
                return run_dir, lock
            print(f"{run_dir} is in use by {holder(run_dir)}; this run goes to the next "
                  "free name")
        n += 1
        run_dir = base.with_name(f"{base.name}-{n}")


def claim_run_dir(run_dir: Path) -> RunLock:
    """This process's lock on an existing run's directory (a resumed or a multi-worker run,
    which cannot move elsewhere); a :class:`UserError` when another process holds it."""
    lock = try_lock(run_dir)
    if lock is None:
        raise UserError(f"{run_dir} is in use by {holder(run_dir)}: two processes training "
                        "one run would mix their checkpoints and metrics; wait for it to "
                        "end, or use another --run-name")
    return lock


def print_table(title: str, rows: list[tuple[str, float | None]]) -> None:
    print(title)
    for name, value in rows:
        if value is not None:
            print(f"  {name:<10} {value:10.2f}")


def _check_vocabularies(run_dir: Path, corpus) -> None:
    """A resumed run's weights index its saved vocabularies: the corpus must rebuild them."""
    from tcnlm_tf.runs.loading import load_run_vocabulary   # imports TensorFlow: not for --help
    files = RunDirectory(run_dir)
    for path, vocab in ((files.lm_vocab, corpus.lm_vocab), (files.topic_vocab, corpus.topic_vocab)):
        name = path.name
        if not path.is_file():
            raise UserError(f"cannot resume {run_dir}: its {name} is missing; the corpus "
                            f"builds it again ({len(vocab)} words): restore it from a copy, "
                            "or start a new run")
        saved = load_run_vocabulary(path).words     # damaged (not UTF-8): one line
        if saved != list(vocab.words):
            raise UserError(f"cannot resume {run_dir}: its {name} ({len(saved)} words) "
                            f"differs from the vocabulary this corpus and tcnlm-tf version "
                            f"build ({len(vocab)} words): if the file was edited or "
                            "truncated, restore it; if the data or the vocabulary rules "
                            "changed, start a new run")


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.resume and args.config is not None:
        raise UserError("--config starts a new run and --resume continues one: give one")
    if args.resume:
        if not args.run_name:
            raise UserError("--resume needs --run-name (the run directory under --runs-dir)")
        run_dir = args.runs_dir / args.run_name
        if not RunDirectory(run_dir).has_checkpoint():
            raise UserError(f"nothing to resume: {run_dir} has no checkpoints/ "
                            "(start it without --resume)")
        saved_rate = RunConfig.load(RunDirectory(run_dir).config).train.learning_rate
        config = resumed_config(args, run_dir)
        # a new --learning-rate replaces the restored (decayed) one; repeating the run's
        # own value does not
        new_rate = (args.learning_rate if args.learning_rate not in (None, saved_rate)
                    else None)
    elif args.config is not None:
        config, new_rate = config_from_file(args), None
    else:
        config, new_rate = config_from_args(args), None
    config.validate()
    if note := corpus_note(config.data):
        print(note)

    corpus = load_corpus(config.data, cache_dir=args.cache_dir)
    config.validate_for_vocabulary(len(corpus.lm_vocab))
    # TensorFlow is imported only once flags and data are known to be good: fast errors.
    from tcnlm_tf.runs.loading import save_vocabularies
    from train.distribution import (COLLECTIVE_ERRORS, collective_failure, is_chief,
                                    make_strategy)
    from train.summaries import write_failure
    from train.trainer import WRITE_ERRORS

    # before any other TensorFlow op: MultiWorkerMirroredStrategy must configure the runtime
    strategy = make_strategy(config.train.strategy)
    warn_if_slow(config.train.precision)
    chief = is_chief(strategy)
    # the chief, the only writer of the run directory, holds its lock while it trains;
    # every worker of a multi-worker run must agree on the directory, so it cannot move
    lock = None
    if args.resume:
        _check_vocabularies(run_dir, corpus)
        lock = claim_run_dir(run_dir) if chief else None
    elif config.train.strategy == "multi_worker":
        run_dir, _ = choose_run_dir(args, config)
        lock = claim_run_dir(run_dir) if chief else None
    else:
        run_dir, lock = choose_run_dir(args, config, claim=True)
    try:
        if chief:
            run_dir.mkdir(parents=True, exist_ok=True)
            # each written atomically: other workers reading it never see half a file
            config.save(RunDirectory(run_dir).config)
            save_vocabularies(run_dir, corpus.lm_vocab, corpus.topic_vocab)
        return _train(args, config, corpus, run_dir, strategy, new_rate)
    except COLLECTIVE_ERRORS as error:
        if config.train.strategy != "multi_worker":
            raise
        raise collective_failure(error) from None
    except WRITE_ERRORS as error:      # e.g. TensorBoard events on a full disk
        raise UserError(f"training in {run_dir} stopped: {write_failure(error)}; "
                        "if the disk is full, free space and --resume (the newest complete "
                        "checkpoint is kept)") from None
    finally:
        if lock is not None:
            lock.release()


def _train(args: argparse.Namespace, config: RunConfig, corpus, run_dir: Path, strategy,
           new_rate: float | None = None) -> dict[str, Any]:
    """Train (or resume) the run in ``run_dir`` with ``strategy``; test it unless stopped by
    --max-steps, or by SIGTERM or Ctrl-C (:mod:`train.stopping`: then, with a checkpoint of
    the last step, it exits with 128 + the signal's number). Returns its metrics.
    ``new_rate``: a resumed run's new learning rate."""
    from train.stopping import StopRequests

    print(f"run directory: {run_dir}")
    print(f"corpus {corpus.name}: LM vocabulary {len(corpus.lm_vocab)}, topic vocabulary "
          f"{len(corpus.topic_vocab)}, " + ", ".join(
              f"{s} {a.num_documents} docs / "
              f"{a.num_predicted_tokens(config.data.line_end)} tokens"
              for s, a in corpus.splits.items()))

    # a signal during start-up stops training after its first step; one during the test
    # evaluation lets it finish (train.stopping)
    with StopRequests() as stop:
        return _fit_and_test(args, config, corpus, run_dir, strategy, new_rate, stop)


def _fit_and_test(args: argparse.Namespace, config: RunConfig, corpus, run_dir: Path,
                  strategy, new_rate: float | None, stop) -> dict[str, Any]:
    """:func:`_train`'s work while ``stop`` (a :class:`train.stopping.StopRequests`) records
    SIGTERM and Ctrl-C."""
    from tcnlm_tf.metrics import baselines
    from tcnlm_tf.metrics.perplexity import perplexity
    from train.trainer import TESTED, Trainer, count_parameters

    trainer = Trainer(config, corpus, run_dir, strategy=strategy)
    if args.resume:
        if not trainer.resume(learning_rate=new_rate):
            raise UserError(f"nothing to resume: {trainer.run_files.checkpoints} holds no "
                            f"complete checkpoint (start the run again without --resume)")
    else:
        trainer.prepare()
    trainer.provenance.append(provenance.collect(args.argv, config.data.data_dir, trainer.step))
    parameters = count_parameters(trainer.model)
    print(f"model {config.model.model} ({config.model.mode} mode"
          + "".join(f", {k} {v}" for k, v in sorted(config.model.options.items())) + "): "
          f"{parameters:,} parameters on "
          f"{trainer.num_replicas} replica(s)"
          + (f" ({'chief' if trainer.chief else 'not the chief'} of a multi-worker cluster)"
             if trainer.multi_worker else ""))
    reason = trainer.fit(stop)
    if reason == "max_steps":
        return trainer.write_metrics(stopped="max_steps", parameters=parameters,
                                     without=TESTED)
    if reason == "interrupted":
        trainer.write_metrics(stopped="interrupted", parameters=parameters, without=TESTED)
        print(f"stopped by {stop.cause} after step {trainer.step}: checkpoint in "
              f"{trainer.run_files.checkpoints}; continue with the same command and --resume "
              f"--runs-dir {shlex.quote(str(run_dir.parent))} "
              f"--run-name {shlex.quote(run_dir.name)}",
              file=sys.stderr, flush=True)
        raise SystemExit(stop.exit_code)

    trainer.restore_best()
    test_nll, test_tokens, document_nll, document_tokens = trainer.evaluate_documents("test")
    test_ppl = perplexity(test_nll, test_tokens)
    trainer.log_test_perplexity(test_ppl)
    unigram = baselines.unigram_perplexity(corpus, "test", line_end=config.data.line_end)
    oracle = baselines.oracle_perplexity(corpus, "test")
    tasks = trainer.evaluate_tasks("test")
    for name, value in tasks.items():
        print(f"test {name}: {value:.4f}")
    metrics = trainer.write_metrics(stopped=reason, parameters=parameters,
                                    test_perplexity=test_ppl,
                                    **({"test_tasks": tasks} if tasks else {}),
                                    test_tokens=int(test_tokens),
                                    test_documents={"nll": document_nll.tolist(),
                                                    "tokens": document_tokens.tolist()},
                                    baselines={"unigram": unigram, "oracle": oracle})
    print_table(f"test perplexity ({corpus.name}, {int(test_tokens)} predicted tokens):",
                [("unigram", unigram), (config.model.model, test_ppl), ("oracle", oracle)])
    if trainer.chief:
        print(f"metrics: {run_dir / 'metrics.json'}; TensorBoard: tensorboard --logdir "
              f"{shlex.quote(str(run_dir))}")
    return metrics


if __name__ == "__main__":
    main()
    sys.exit(0)
