"""A NaN or infinite loss term stops training with one line (the step, the term), saves
nothing after it, and --resume continues from the last good checkpoint with a new learning
rate."""
import math

import pytest
import tensorflow as tf

from tcnlm_tf.data.loading import load_corpus
from tcnlm_tf.errors import UserError
from tcnlm_tf.runs.checkpoints import checkpoint_paths
from tests.conftest import TINY, TINY_EPOCH, run_flags
from train.run import build_parser, config_from_args, main
from train.trainer import NonFiniteLoss, Trainer


def resumed_trainer(tmp_path, name):
    """A 3-step tiny run ``name`` and a Trainer resumed from it (up to 6 steps): (flags,
    the checkpoint directory, its files' bytes, the trainer)."""
    flags = TINY + run_flags(tmp_path, name)
    main(flags + ["--max-steps", "3"])
    checkpoints = tmp_path / "runs" / name / "checkpoints"
    before = {p.name: p.read_bytes() for p in checkpoints.iterdir()}
    config = config_from_args(build_parser().parse_args(flags + ["--max-steps", "6"]))
    corpus = load_corpus(config.data, cache_dir=tmp_path / "cache", log=lambda _: None)
    trainer = Trainer(config, corpus, tmp_path / "runs" / name, log=lambda _: None)
    assert trainer.resume()
    return flags, checkpoints, before, trainer


@pytest.mark.parametrize("term,named", [("nll_sum", "language-model loss is nan"),
                                        ("aux_loss", "other loss terms (aux_loss) is inf")])
def test_a_non_finite_term_stops_training_and_keeps_the_last_checkpoint(tmp_path, term, named):
    flags, checkpoints, before, trainer = resumed_trainer(tmp_path, "nan")
    original = trainer.model.loss_terms

    def loss_terms(batch, training=False, state=None):
        terms = original(batch, training=training, state=state)
        if training:   # from the 5th step on (the step function is traced once)
            bad = tf.cast(trainer.optimizer.iterations >= 4, tf.float32)
            poison = math.inf if term == "aux_loss" else math.nan
            terms[term] = terms[term] + tf.where(bad > 0, poison, 0.0)
        return terms

    trainer.model.loss_terms = loss_terms
    with pytest.raises(NonFiniteLoss) as stop:
        trainer.fit()
    message = str(stop.value)
    assert "step 5" in message and named in message and "ckpt-3" in message
    assert "--resume" in message and "\n" not in message
    # a UserError: the command line prints it as one `error:` line and exits with status 2
    assert isinstance(stop.value, UserError)
    # nothing was written after the bad step: the checkpoints are byte for byte the same
    assert {p.name: p.read_bytes() for p in checkpoints.iterdir()} == before
    # and the run continues from step 3 with a new learning rate
    metrics = main(flags + ["--resume", "--max-steps", "5", "--lr", "0.0005"])
    assert metrics["steps"] == 5
    assert [p.rsplit("/", 1)[-1] for p in checkpoint_paths(checkpoints)][0] == "ckpt-5"


def test_weights_that_are_not_finite_are_never_saved(tmp_path):
    """A weight turned NaN (as --learning-rate inf once made every weight) stops the save
    with the one-line stop naming the weight; the checkpoints stay as they were."""
    _, checkpoints, before, trainer = resumed_trainer(tmp_path, "weights")
    weight = trainer.model.embedding.embeddings
    weight.assign(tf.tensor_scatter_nd_update(weight, [[1, 0]], [math.nan]))
    with pytest.raises(NonFiniteLoss) as stop:
        trainer._save_training()
    message = str(stop.value)
    assert "NaN or infinite value is lstm_lm/embedding/embeddings" in message
    assert "ckpt-3" in message and "\n" not in message
    assert {p.name: p.read_bytes() for p in checkpoints.iterdir()} == before


@pytest.mark.parametrize("command,flag,value", [
    ("train.run", "--learning-rate", "inf"), ("train.run", "--lr", "1e999"),
    ("train.run", "--dropout", "nan"), ("train.run", "--diversity-weight", "-inf"),
    ("evaluate.compare", "--learning-rates", "0.001,inf"),
    ("evaluate.generate", "--temperature", "nan"), ("train.word2vec", "--sample", "inf")])
def test_non_finite_options_are_refused_up_front(command, flag, value):
    """argparse's own error for the flag (status 2, no traceback), before any work."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    extra = ["--model", "tcnlm"] if flag == "--diversity-weight" else []
    result = subprocess.run([sys.executable, "-m", command, *extra, f"{flag}={value}"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "error: argument" in last and flag in last and "finite number" in last, last


def test_a_run_that_diverges_to_an_infinite_validation_perplexity_stops(tmp_path, capsys):
    """--learning-rate 1e30 (finite, so accepted) drives the loss to 1e30 with finite
    weights: the run once ended with exit 0, 'valid perplexity inf' as its best and an
    infinite test perplexity; it now stops at the validation with the one-line stop."""
    with pytest.raises(SystemExit) as exit_info:
        main(TINY_EPOCH + ["--lr", "1e30"] + run_flags(tmp_path, "diverged"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "validation perplexity (the weights diverged) is inf" in err
    assert not (tmp_path / "runs" / "diverged" / "best").exists()
