"""``--long-sentences carry``: sentence mode carrying the state across the pieces of a
sentence longer than the sequence length scores exactly what one pass over each whole
sentence scores, differs from ``reset`` where sentences are cut, trains, and resumes
mid-epoch to the uninterrupted weights."""
import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.data.loading import load_corpus
from train.run import build_parser, config_from_args, main
from train.trainer import Trainer
from tests.conftest import TINY, TINY_EPOCH, TINY_MODELS

pytestmark = pytest.mark.slow


def trainer(tmp_path, model, *flags):
    """A fresh (untrained) Trainer of the tiny ``model`` with ``flags``: the same seed, so
    the same starting weights whatever the sequence length and protocol."""
    args = TINY + TINY_MODELS[model] + ["--runs-dir", str(tmp_path / "runs"), "--cache-dir",
                                        str(tmp_path / "cache"), *flags]
    config = config_from_args(build_parser().parse_args(args))
    config.validate()
    corpus = load_corpus(config.data, cache_dir=tmp_path / "cache")
    name = "-".join([model, *flags]).replace("--", "")
    return Trainer(config, corpus, tmp_path / "runs" / name, log=lambda line: None)


@pytest.mark.parametrize("model", ["tdlm"])
def test_carried_pieces_score_what_whole_sentences_score(tmp_path, model):
    whole = trainer(tmp_path, model, "--seq-len", "200")
    whole.config.train.max_steps, whole.config.train.epochs = None, 3
    whole.fit()                             # trained a little, so the state carries context
    carried = trainer(tmp_path, model, "--seq-len", "3", "--long-sentences", "carry")
    reset = trainer(tmp_path, model, "--seq-len", "3")
    for other in (carried, reset):
        for variable, value in zip(other.model.weights, whole.model.weights):
            variable.assign(value)
    nll_whole, tokens = whole.evaluate("test")
    nll_carried, carried_tokens = carried.evaluate("test")
    nll_reset, _ = reset.evaluate("test")
    assert tokens == carried_tokens
    assert nll_carried == pytest.approx(nll_whole, rel=1e-6)
    assert abs(nll_reset - nll_whole) > 1e-3 * nll_whole      # the cut pieces lose context


def test_carry_trains_and_resumes_mid_epoch_to_the_uninterrupted_weights(tmp_path):
    flags = TINY_EPOCH + ["--seq-len", "4", "--long-sentences", "carry", "--runs-dir",
                          str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")]
    whole = main(flags + ["--run-name", "whole"])
    main(flags + ["--run-name", "cut", "--max-steps", "3"])
    cut = main(flags + ["--run-name", "cut", "--resume"])
    assert cut["test_perplexity"] == whole["test_perplexity"]

    def weights(name):
        reader = tf.train.load_checkpoint(str(tmp_path / "runs" / name / "checkpoints"))
        return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
                if key.startswith("model/")}

    for key, value in weights("whole").items():
        np.testing.assert_array_equal(weights("cut")[key], value, err_msg=key)


def test_carry_is_a_sentence_mode_setting(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(TINY + ["--mode", "document", "--long-sentences", "carry", "--runs-dir",
                     str(tmp_path)])
    assert "--long-sentences carry only applies to --mode sentence" in capsys.readouterr().err
