"""A NaN or infinite loss term stops training with one line (the step, the term), saves
nothing after it, and --resume continues from the last good checkpoint with a new learning
rate."""
import math

import pytest
import tensorflow as tf

from tcnlm_tf.checkpoints import checkpoint_paths
from tcnlm_tf.data import load_corpus
from tcnlm_tf.errors import UserError
from tests.conftest import TINY, run_flags
from train.run import build_parser, config_from_args, main
from train.trainer import NonFiniteLoss, Trainer


@pytest.mark.parametrize("term,named", [("nll_sum", "language-model loss is nan"),
                                        ("aux_loss", "other loss terms (aux_loss) is inf")])
def test_a_non_finite_term_stops_training_and_keeps_the_last_checkpoint(tmp_path, term, named):
    flags = TINY + run_flags(tmp_path, "nan")
    main(flags + ["--max-steps", "3"])
    checkpoints = tmp_path / "runs" / "nan" / "checkpoints"
    before = {p.name: p.read_bytes() for p in checkpoints.iterdir()}
    config = config_from_args(build_parser().parse_args(flags + ["--max-steps", "6"]))
    corpus = load_corpus(config.data, cache_dir=tmp_path / "cache", log=lambda _: None)
    trainer = Trainer(config, corpus, tmp_path / "runs" / "nan", log=lambda _: None)
    assert trainer.resume()
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
