"""End-to-end training on a small synthetic corpus: the perplexity ordering, --resume,
TensorBoard events and the run directory's contents."""
import json

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from tcnlm_tf.data.loading import load_corpus
from tcnlm_tf.models.registry import MODELS
from train.run import build_parser, config_from_args, main
from train.trainer import Trainer
from tests.conftest import TINY, TINY_EPOCH, TINY_MODELS, run_flags

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow

SMALL_SYNTHETIC = ["--synthetic", "train_docs=240", "--synthetic", "valid_docs=30",
                   "--synthetic", "test_docs=30", "--synthetic", "num_topics=6",
                   "--synthetic", "content_vocab_size=240", "--synthetic", "seed=3"]
SMALL_MODEL = ["--hidden-size", "96", "--embedding-dim", "48", "--batch-size", "32",
               "--dropout", "0.1", "--learning-rate", "0.005", "--log-every", "5"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("training")


def common(workdir):
    return ["--runs-dir", str(workdir / "runs"), "--cache-dir", str(workdir / "cache")]


@pytest.fixture(scope="module")
def sentence_run(workdir):
    """Train 15 steps, stop, then rerun the same command with --resume to the end."""
    args = SMALL_SYNTHETIC + SMALL_MODEL + common(workdir) + ["--epochs", "4", "--run-name", "s"]
    stopped = main(args + ["--max-steps", "15"])
    assert stopped["stopped"] == "max_steps" and stopped["steps"] == 15
    # the run's own command repeated with --resume: unchanged settings are accepted
    finished = main(args + ["--resume"])
    return workdir / "runs" / "s", finished


def test_unigram_worse_than_lstm_worse_than_oracle(sentence_run):
    _, metrics = sentence_run
    unigram, lstm = metrics["baselines"]["unigram"], metrics["test_perplexity"]
    oracle = metrics["baselines"]["oracle"]
    assert unigram > lstm > oracle, (unigram, lstm, oracle)
    assert metrics["test_tokens"] > 0


def test_a_run_trained_on_past_its_end_drops_its_old_test_until_it_ends_again(
        workdir, monkeypatch):
    """A finished run resumed with a larger --epochs (as evaluate.compare does for rows that
    stopped on a lower cap): from its first new epoch on, metrics.json has neither the old
    test perplexity nor the old stop reason, so a process killed before the new end leaves a
    run that train.status and evaluate.compare see as unfinished, not as finished with a test
    of other weights; the new end writes both again."""
    args = TINY_EPOCH + common(workdir) + ["--run-name", "trained-on"]
    first = main(args)
    assert first["stopped"] == "epochs" and "test_perplexity" in first

    def killed(self):
        raise RuntimeError("killed before the test")

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "restore_best", killed)
        with pytest.raises(RuntimeError, match="killed before the test"):
            main(args + ["--resume", "--epochs", "2"])
    metrics = json.loads((workdir / "runs" / "trained-on" / "metrics.json").read_text())
    assert len(metrics["epochs"]) == 2
    assert not {"test_perplexity", "test_tokens", "baselines", "stopped"} & metrics.keys()
    again = main(args + ["--resume", "--epochs", "2"])
    assert again["stopped"] == "epochs" and len(again["epochs"]) == 2
    assert "test_perplexity" in again


def test_resume_at_max_steps_trains_nothing(workdir, capsys):
    """Resuming a run that stopped at --max-steps N with the same N trains no step (it once
    trained one more) and keeps its weights."""
    args = TINY + ["--max-steps", "2"] + common(workdir) + ["--run-name", "at-max-steps"]
    assert main(args)["steps"] == 2
    run_dir = workdir / "runs" / "at-max-steps"
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    again = main(args + ["--resume"])
    assert again["stopped"] == "max_steps" and again["steps"] == 2
    assert "nothing to train" in capsys.readouterr().out
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == checkpoints


def test_resumed_run_finished_all_epochs(sentence_run):
    run_dir, metrics = sentence_run
    assert metrics["stopped"] == "epochs"
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3, 4]
    assert json.loads((run_dir / "metrics.json").read_text())["test_perplexity"] == \
        metrics["test_perplexity"]
    for name in ("config.json", "lm_vocab.txt", "topic_vocab.txt", "checkpoints/checkpoint",
                 "best/checkpoint"):
        assert (run_dir / name).is_file(), name


def test_tensorboard_reader_loads_the_scalars(sentence_run):
    run_dir, metrics = sentence_run
    acc = event_accumulator.EventAccumulator(
        str(run_dir / "tensorboard"), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = set(acc.Tags()["tensors"])
    assert {"train/loss", "train/perplexity", "train/learning_rate", "train/tokens_per_sec",
            "valid/perplexity", "test/perplexity"} <= tags
    valid = [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors("valid/perplexity")]
    assert len(valid) == 4
    np.testing.assert_allclose(valid, [e["valid_perplexity"] for e in metrics["epochs"]],
                               rtol=1e-5)
    test = acc.Tensors("test/perplexity")
    assert float(tf.make_ndarray(test[-1].tensor_proto)) == pytest.approx(
        metrics["test_perplexity"], rel=1e-5)


@pytest.mark.parametrize("model", ["lstm", "tcnlm"])
def test_resume_restores_optimizer_step_and_weights(workdir, model):
    args = SMALL_SYNTHETIC + SMALL_MODEL + common(workdir) + [
        "--run-name", f"r-{model}", "--model", model, "--num-layers", "2",
        *MODELS[model].test_flags]
    config = config_from_args(build_parser().parse_args(args))
    run_dir = workdir / "runs" / f"r-{model}"
    corpus = load_corpus(config.data, cache_dir=workdir / "cache")
    config.train.max_steps = 4
    trained = Trainer(config, corpus, run_dir)
    assert trained.fit() == "max_steps"
    weights = [v.numpy() for v in trained.model.weights]   # paths may repeat: compare in order
    slots = [v.numpy() for v in trained.optimizer.variables]

    fresh = Trainer(config, corpus, run_dir)
    # before restoring, the fresh model differs from the trained one in every trainable weight
    trainable = {id(v) for v in fresh.model.trainable_variables}
    unchanged = [v.path for v, w in zip(fresh.model.weights, weights)
                 if id(v) in trainable and np.array_equal(v.numpy(), w)]
    assert not unchanged
    assert fresh.step == 0
    assert fresh.resume()
    assert fresh.step == 4 == int(fresh.batch_in_epoch)
    assert len(fresh.model.weights) == len(weights)
    for variable, want in zip(fresh.model.weights, weights):
        np.testing.assert_array_equal(variable.numpy(), want, variable.path)
    assert len(fresh.optimizer.variables) == len(slots)
    for got, want in zip(fresh.optimizer.variables, slots):
        np.testing.assert_array_equal(got.numpy(), want, got.path)

    # continuing trains from there: two more steps, then stop again
    fresh.config.train.max_steps = 6
    assert fresh.fit() == "max_steps" and fresh.step == 6


def test_resume_refuses_a_changed_vocabulary(workdir, sentence_run, capsys):
    """Weights index the saved vocabularies: a run whose topic_vocab.txt no longer matches
    what the corpus builds (e.g. after a vocabulary rule changed) is not resumed."""
    import shutil

    run_dir, _ = sentence_run
    copy = run_dir.parent / "changed-vocab"
    shutil.copytree(run_dir, copy)
    words = (copy / "topic_vocab.txt").read_text().splitlines()
    (copy / "topic_vocab.txt").write_text("\n".join(words[:-1]) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        main(SMALL_SYNTHETIC + common(workdir) + ["--run-name", "changed-vocab", "--resume"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert f"topic_vocab.txt ({len(words) - 1} words) differs" in err
    assert f"({len(words)} words)" in err
    assert (copy / "topic_vocab.txt").read_text().splitlines() == words[:-1]   # left as it was


def test_best_checkpoint_reloads_to_the_same_test_perplexity(sentence_run):
    """A run reloaded in a new model reproduces the test perplexity measured in training."""
    from tcnlm_tf.metrics.evaluation import corpus_nll
    from tcnlm_tf.metrics.perplexity import perplexity
    from tcnlm_tf.runs.loading import load_run
    from evaluate.common import read_documents, split_file

    run_dir, metrics = sentence_run
    run = load_run(run_dir)
    nll, tokens = corpus_nll(run, read_documents(split_file(run, "test")))
    assert tokens == metrics["test_tokens"]
    assert perplexity(nll, tokens) == pytest.approx(metrics["test_perplexity"], rel=1e-4)


def test_document_mode_trains_and_reports_the_same_token_count(workdir, sentence_run):
    args = SMALL_SYNTHETIC + SMALL_MODEL + common(workdir) + ["--mode", "document",
                                                              "--epochs", "1"]
    metrics = main(args)
    assert metrics["mode"] == "document"
    assert np.isfinite(metrics["test_perplexity"])
    assert metrics["test_perplexity"] < metrics["baselines"]["unigram"]
    assert metrics["test_tokens"] == sentence_run[1]["test_tokens"]


def test_checkpoints_within_an_epoch(workdir):
    """--checkpoint-minutes 1e-9 saves after every step: the kept checkpoints are mid-epoch
    ones, and resuming from one continues from its batch."""
    args = SMALL_SYNTHETIC + SMALL_MODEL + common(workdir) + [
        "--run-name", "mid", "--epochs", "1", "--checkpoint-minutes", "1e-9"]
    config = config_from_args(build_parser().parse_args(args))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache")
    config.train.max_steps = 5
    trainer = Trainer(config, corpus, workdir / "runs" / "mid")
    assert trainer.fit() == "max_steps"
    numbers = [int(path.rsplit("-", 1)[1]) for path in trainer.manager.checkpoints]
    assert numbers == [3, 4, 5]   # steps 3 and 4 were saved inside the epoch
    earlier = Trainer(config, corpus, workdir / "runs" / "mid")
    earlier.checkpoint.restore(trainer.manager.checkpoints[1]).assert_consumed()
    assert earlier.step == 4 == int(earlier.batch_in_epoch)


@pytest.mark.parametrize("mode", ["document", "stream", "tcnlm"])
def test_a_stateful_run_interrupted_mid_epoch_ends_at_the_uninterrupted_weights(workdir, mode):
    """The lanes' carried state is saved with a mid-epoch checkpoint: stopping after 3 steps
    and resuming ends the epoch at exactly the weights of a run that never stopped (the lanes
    once restarted from zeros). So is the state of the seed generator that draws the
    posterior samples of TCNLM (and of the MoE and Topic-RNN, which share its encoder)."""
    extra = (["--mode", mode] if mode in ("document", "stream")
             else list(TINY_MODELS[mode]))
    flags = TINY_EPOCH + common(workdir) + extra
    main(flags + ["--run-name", f"{mode}-whole"])
    main(flags + ["--run-name", f"{mode}-cut", "--max-steps", "3"])
    assert (workdir / "runs" / f"{mode}-cut" / "checkpoints" / "resume-state-3.npz").is_file()
    main(flags + ["--run-name", f"{mode}-cut", "--resume"])

    def final_weights(name):
        reader = tf.train.load_checkpoint(str(workdir / "runs" / name / "checkpoints"))
        return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
                if key.startswith("model/")}

    whole, cut = final_weights(f"{mode}-whole"), final_weights(f"{mode}-cut")
    assert whole.keys() == cut.keys() and whole
    for key in whole:
        np.testing.assert_array_equal(cut[key], whole[key], err_msg=key)
    # a state file lives only as long as its checkpoint
    directory = workdir / "runs" / f"{mode}-cut" / "checkpoints"
    for path in directory.glob("resume-state-*.npz"):
        assert (directory / f"ckpt-{path.stem.rsplit('-', 1)[-1]}.index").is_file()


@pytest.mark.parametrize("start, rates, stops", [
    (1, [1.0, 0.5, 0.25, 0.125], [False, False, True, True]),
    (3, [1.0, 1.0, 0.5, 0.25], [False, False, False, True]),
])
def test_lr_decay_start_keeps_the_rate_and_the_patience_of_earlier_epochs(
        workdir, start, rates, stops):
    """Validation improves once, then never: with --lr-decay-start 3 (the SDLM authors'
    rule, there at 15) epoch 2's end keeps the rate and does not count toward --patience;
    from epoch 3 on every epoch without improvement halves it, as from epoch 2 by default."""
    config = config_from_args(build_parser().parse_args(
        TINY + common(workdir) + ["--run-name", f"decay-{start}", "--learning-rate", "1.0",
                                  "--lr-decay-start", str(start), "--patience", "2"]))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    trainer = Trainer(config, corpus, workdir / "runs" / f"decay-{start}", log=lambda _: None)
    perplexities = iter([100.0, 120.0, 130.0, 140.0])
    trainer.evaluate_perplexity = lambda split: next(perplexities)
    trainer.evaluate_tasks = lambda split: {}
    trainer.epoch_summary = {"train_loss": 0.0, "tokens_per_sec": 0.0}
    got_rates, got_stops = [], []
    for _ in range(4):
        got_stops.append(trainer.end_epoch())
        got_rates.append(float(trainer.learning_rate))
    assert got_rates == rates and got_stops == stops


def test_a_run_resumed_after_early_stopping_trains_no_further(workdir):
    """A run stopped by --patience and resumed (e.g. killed during its test evaluation) goes
    straight to its test: it once trained on past its early stopping."""
    config = config_from_args(build_parser().parse_args(
        TINY + common(workdir) + ["--run-name", "stopped-early", "--patience", "1",
                                  "--epochs", "5"]))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    trainer = Trainer(config, corpus, workdir / "runs" / "stopped-early", log=lambda _: None)
    perplexities = iter([100.0, 120.0])
    trainer.evaluate_perplexity = lambda split: next(perplexities)
    trainer.evaluate_tasks = lambda split: {}
    trainer.epoch_summary = {"train_loss": 0.0, "tokens_per_sec": 0.0}
    assert [trainer.end_epoch(), trainer.end_epoch()] == [False, True]
    assert trainer.fit() == "early_stopping" and trainer.step == 0


class LateStop:
    """A stop request that arrives while the epoch's last step runs: the first ``after``
    looks at it see none."""

    def __init__(self, after):
        self.after, self.reads = after, 0

    @property
    def requested(self):
        self.reads += 1
        return self.reads > self.after


def test_a_stop_during_the_last_step_saves_the_finished_epoch_before_validating(workdir):
    """The request is honoured before the validation (which can outlast a scheduler's grace
    period): a checkpoint after the epoch's last batch, and the resumed run validates that
    epoch and ends at exactly the weights of a run that never stopped."""
    flags = TINY_EPOCH + common(workdir)
    main(flags + ["--run-name", "late-whole"])
    config = config_from_args(build_parser().parse_args(flags + ["--run-name", "late-cut"]))
    corpus = load_corpus(config.data, cache_dir=workdir / "cache", log=lambda _: None)
    run_dir = workdir / "runs" / "late-cut"
    trainer = Trainer(config, corpus, run_dir, log=lambda _: None)
    config.save(run_dir / "config.json")                # what train.run writes first
    corpus.lm_vocab.save(run_dir / "lm_vocab.txt")
    corpus.topic_vocab.save(run_dir / "topic_vocab.txt")
    trainer.prepare()
    batches = len(trainer._epoch_plan(0)[1])
    assert trainer.fit(LateStop(after=batches)) == "interrupted"
    assert int(trainer.epoch) == 0 and int(trainer.batch_in_epoch) == batches == trainer.step
    assert trainer.history == []                       # not validated
    resumed = main(flags + ["--run-name", "late-cut", "--resume"])
    assert [e["epoch"] for e in resumed["epochs"]] == [1]

    def final_weights(name):
        reader = tf.train.load_checkpoint(str(workdir / "runs" / name / "checkpoints"))
        return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
                if key.startswith("model/")}

    whole, cut = final_weights("late-whole"), final_weights("late-cut")
    assert whole.keys() == cut.keys() and whole
    for key in whole:
        np.testing.assert_array_equal(cut[key], whole[key], err_msg=key)


def test_a_corpus_without_topic_words_trains_the_lstm_and_stops_a_topic_model(tmp_path,
                                                                                 capsys):
    """With no word in --topic-min-docs documents the topic vocabulary is empty: the plain
    LSTM, which never reads it, trains; a model that reads topic words gets one line."""
    no_topics = ["--topic-min-docs", "100000"]
    metrics = main(TINY_EPOCH + no_topics + run_flags(tmp_path, "lstm"))
    assert metrics["test_perplexity"] > 1
    with pytest.raises(SystemExit) as exit_info:
        main(TINY + no_topics + ["--model", "tcnlm"] + run_flags(tmp_path, "tcnlm"))
    assert exit_info.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: the topic-model vocabulary is empty") and \
        "--model tcnlm reads topic words (bow" in err and "lower --topic-min-docs" in err


@pytest.mark.parametrize("cut", ["mid-epoch", "last-batch"])
def test_a_resumed_epoch_reports_the_loss_of_all_its_batches(workdir, cut):
    """An epoch stopped by --max-steps, in its middle or right after its last batch, and
    resumed reports the training loss of all its batches, as the run that never stopped
    (once: only the batches after the stop, or 0.0 and 0 tokens/s after the last batch)."""
    flags = TINY_EPOCH + common(workdir)
    whole = main(flags + ["--run-name", f"whole-{cut}"])
    stop = whole["steps"] // 2 if cut == "mid-epoch" else whole["steps"]
    assert main(flags + ["--run-name", cut, "--max-steps", str(stop)])["stopped"] == "max_steps"
    resumed = main(flags + ["--run-name", cut, "--resume"])
    assert resumed["steps"] == whole["steps"]
    assert resumed["epochs"][0]["train_loss"] == pytest.approx(
        whole["epochs"][0]["train_loss"], rel=1e-6)
    assert resumed["epochs"][0]["tokens_per_sec"] > 0


def test_a_run_shorter_than_log_every_still_logs_its_training_scalars(workdir):
    """TINY logs every 100 steps and stops after 3: the last, partial window is logged at
    the stop (once, nothing)."""
    main(TINY + common(workdir) + ["--run-name", "short-log"])
    acc = event_accumulator.EventAccumulator(
        str(workdir / "runs" / "short-log" / "tensorboard"),
        size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    assert [e.step for e in acc.Tensors("train/loss")] == [3]
    assert float(tf.make_ndarray(acc.Tensors("train/loss")[0].tensor_proto)) > 0
