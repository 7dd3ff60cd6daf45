"""The extension points, each used by something defined in this file alone, through the
project's own commands with no other file edited: a new context field
(:func:`tcnlm_tf.data.pipeline.register_context_field`) read by a new model (a
:class:`~tcnlm_tf.models.registry.ModelSpec` in :data:`~tcnlm_tf.models.registry.MODELS`),
and a new decoder (:func:`tcnlm_tf.decoders.registry.register_decoder`) with an option and a
per-run preparation, each trained, evaluated and exported.
"""
from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf.data import pipeline
from tcnlm_tf.decoders.output_layers import Decoder
from tcnlm_tf.decoders.registry import DECODERS, DecoderSpec, register_decoder
from tcnlm_tf.metrics.baselines import target_counts
from tcnlm_tf.models.base import Context
from tcnlm_tf.models.lstm import LSTMLanguageModel
from tcnlm_tf.models.registry import MODELS, ModelSpec, compare_rows
from tcnlm_tf.options import Option, positive
from tests.conftest import TINY, run_flags

pytestmark = pytest.mark.slow


# --------------------------------------------------------------- a toy context field
def context_length(source: pipeline.ContextSource, spec: pipeline.ContextSpec) -> tf.Tensor:
    """``context_length`` [B] float32: how many topic-vocabulary words the example's document
    context holds (the document minus the left-out span of its context row)."""
    start, cut_start, cut_end, end = tf.unstack(source.rows, axis=1)
    return tf.cast((end - start) - (cut_end - cut_start), tf.float32)


class ContextLengthModel(LSTMLanguageModel):
    """The LSTM whose first layer's inputs are shifted by a learned vector times
    log(1 + the document context's length): it reads the toy field and nothing else."""

    context_inputs = ("context_length",)

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None):
        return cls(**cls.lm_arguments(config, lm_vocab, run_dir), name="context_length_lm")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.length_projection = keras.layers.Dense(self.embedding.output_dim,
                                                    name="length_projection")

    def context(self, batch, training=False) -> Context:
        return Context({"length": tf.math.log1p(batch["context_length"])[:, None]})

    def run_layer(self, layer, x, context, state, training):
        if layer is self.rnns[0]:
            x = x + self.length_projection(context["length"])[:, None, :]
        return layer(x, initial_state=state, training=training)


@pytest.fixture
def context_length_model(monkeypatch):
    """The field and the model registered for one test."""
    monkeypatch.setitem(MODELS, "context_length", ModelSpec(
        "context_length", f"{__name__}:ContextLengthModel",
        "an LSTM told how long its document context is"))
    pipeline.register_context_field("context_length",
                                    pipeline.ContextField(context_length, "document"))
    yield
    del pipeline.CONTEXT_FIELDS["context_length"]


def test_a_context_field_and_its_model_train_evaluate_and_export(context_length_model,
                                                                 tmp_path):
    from tcnlm_tf.data.loading import load_corpus
    from tcnlm_tf.metrics.evaluation import corpus_nll

    run, _, documents, nll = trained_evaluated_exported(tmp_path, ["--model", "context_length"])
    assert isinstance(run.model, ContextLengthModel)
    # the batches carry the field, made as its builder says
    arrays = load_corpus(run.config.data, cache_dir=tmp_path / "cache").splits["valid"]
    examples = pipeline.sentence_examples(arrays, run.config.data.seq_len)
    batch = next(iter(pipeline.model_dataset(run.model, run.config, arrays, "valid",
                                             batch_size=len(examples), examples=examples)))
    rows = examples.context
    expected = (rows[:, 3] - rows[:, 0]) - (rows[:, 2] - rows[:, 1])
    np.testing.assert_array_equal(batch["context_length"].numpy(), expected)
    assert expected.min() < expected.max()
    # and the scores depend on it
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(pipeline.CONTEXT_FIELDS, "context_length", dataclasses.replace(
            pipeline.CONTEXT_FIELDS["context_length"],
            build=lambda source, spec: tf.zeros(tf.shape(source.rows)[:1], tf.float32)))
        assert corpus_nll(run, documents, split="test")[0] != pytest.approx(nll, rel=1e-6)


def trained_evaluated_exported(tmp_path, flags: list[str]):
    """Train a tiny run with ``flags``, score its test split with ``evaluate.perplexity``
    and the library, and its export with ``evaluate.score``: (the run, the perplexity
    command's result, its documents, the library's NLL)."""
    from evaluate.common import read_documents
    from evaluate.perplexity import main as perplexity_main
    from evaluate.score import main as score_main
    from tcnlm_tf.metrics.evaluation import corpus_nll
    from tcnlm_tf.runs.loading import load_run
    from train.export import main as export_main
    from train.run import main as train_main

    train_main(TINY + flags + run_flags(tmp_path, "toy"))
    run_dir = tmp_path / "runs" / "toy"
    run = load_run(run_dir)
    result = perplexity_main(["--run", str(run_dir)])
    documents = read_documents(result["file"])
    nll, tokens = corpus_nll(run, documents, split="test")
    assert result["nll"] == pytest.approx(nll, rel=1e-6) and result["predicted_tokens"] == tokens
    saved = export_main(["--run", str(run_dir), "--output-dir", str(tmp_path / "saved")])
    text = tmp_path / "docs.txt"
    text.write_text("".join("\t".join(" ".join(s) for s in d) + "\n" for d in documents))
    served = score_main(["--saved-model", str(saved), "--text-file", str(text)])
    assert served["tokens"] == tokens
    assert served["perplexity"] == pytest.approx(result["perplexity"], rel=1e-5)
    return run, result, documents, nll


# -------------------------------------------------------------------- a toy decoder
UNIGRAM_FILE = "unigram_log_probs.npy"


class ScaledSoftmax(keras.layers.Layer):
    """A full softmax at a temperature: hidden [..., H] -> log softmax((h W + b) / tau)
    [..., V], its bias starting at ``initial_bias`` [V]."""

    def __init__(self, vocab_size: int, temperature: float, initial_bias=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.temperature = vocab_size, temperature
        self.initial_bias = initial_bias

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.vocab_size))
        initializer = ("zeros" if self.initial_bias is None
                       else keras.initializers.Constant(self.initial_bias))
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,),
                                    initializer=initializer)

    def call(self, hidden):
        logits = tf.matmul(hidden, self.kernel) + self.bias
        return tf.nn.log_softmax(logits / self.temperature, axis=-1)

    def target_log_prob(self, hidden, targets, training=False):
        picked = tf.gather(self(hidden), targets[..., None], batch_dims=len(targets.shape))
        return picked[..., 0]


class ScaledSoftmaxDecoder(Decoder):
    """The toy decoder: its run's preparation writes the log unigram distribution of the
    training targets to the run directory, where every rebuild reads it back."""

    @classmethod
    def prepare_run(cls, config, corpus, run_dir, log):
        counts = target_counts(corpus.splits["train"], len(corpus.lm_vocab)) + 1.0
        np.save(run_dir / UNIGRAM_FILE, np.log(counts / counts.sum()).astype(np.float32))
        log(f"unigram log-probabilities written to {run_dir / UNIGRAM_FILE}")

    @classmethod
    def layer_options(cls, options, lm_vocab, run_dir):
        return {"temperature": options["softmax_temperature"],
                "initial_bias": np.load(run_dir / UNIGRAM_FILE)}

    @classmethod
    def build(cls, options, vocab_size, input_size, embedding):
        return ScaledSoftmax(vocab_size, options["temperature"], options["initial_bias"],
                             name="scaled_softmax")


@pytest.fixture
def scaled_softmax_decoder():
    """The decoder registered for one test."""
    register_decoder(DecoderSpec(
        "scaled", f"{__name__}:ScaledSoftmaxDecoder", "a softmax at a temperature",
        options=(Option("softmax_temperature", float, 1.0, "the softmax's temperature tau",
                        positive, "must be positive"),),
        compare_rows={"lstm-scaled": ("--softmax-temperature", "2")}))
    yield
    del DECODERS["scaled"]


def test_a_decoder_trains_evaluates_and_exports(scaled_softmax_decoder, tmp_path, capsys):
    from tcnlm_tf.data.loading import load_corpus
    from tcnlm_tf.models import build_model
    from train.run import main as train_main

    # its flag, validation and compare row come from its spec
    assert compare_rows()["lstm-scaled"] == ("lstm", ["--model", "lstm", "--decoder", "scaled",
                                                      "--softmax-temperature", "2"])
    for flags, message in ((["--softmax-temperature", "2"], "an option of --decoder scaled"),
                           (["--decoder", "scaled", "--softmax-temperature", "0"],
                            "--softmax-temperature must be positive")):
        with pytest.raises(SystemExit):
            train_main(TINY + flags + run_flags(tmp_path, "refused"))
        assert message in capsys.readouterr().err

    run, _, _, _ = trained_evaluated_exported(
        tmp_path, ["--decoder", "scaled", "--softmax-temperature", "2"])
    assert run.config.model.decoder_options == {"softmax_temperature": 2.0}
    assert isinstance(run.model.softmax, ScaledSoftmax) and run.model.softmax.temperature == 2.0
    unigram = np.load(run.directory / UNIGRAM_FILE)
    assert "unigram log-probabilities written" in capsys.readouterr().out
    fresh = build_model(run.config, run.lm_vocab, run.topic_vocab, run.directory)
    arrays = load_corpus(run.config.data, cache_dir=tmp_path / "cache").splits["valid"]
    fresh(next(iter(pipeline.make_dataset(arrays, run.config.data.seq_len, 4, "sentence"))))
    np.testing.assert_array_equal(fresh.softmax.bias.numpy(), unigram)
    assert not np.array_equal(run.model.softmax.bias.numpy(), unigram)     # trained
