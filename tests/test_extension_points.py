"""The extension points, each used by something defined in this file alone: a new context
field (:func:`tcnlm_tf.pipeline.register_context_field`) read by a new model (a
:class:`~tcnlm_tf.models.registry.ModelSpec` in :data:`~tcnlm_tf.models.registry.MODELS`)
trains, evaluates and exports through the project's own commands with no other file edited.
"""
from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from tcnlm_tf import pipeline
from tcnlm_tf.models.base import Context
from tcnlm_tf.models.lstm import LSTMLanguageModel
from tcnlm_tf.models.registry import MODELS, ModelSpec
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
    from evaluate.common import read_documents
    from evaluate.perplexity import main as perplexity_main
    from evaluate.score import main as score_main
    from tcnlm_tf.data import load_corpus
    from tcnlm_tf.evaluation import corpus_nll
    from tcnlm_tf.runs import load_run
    from train.export import main as export_main
    from train.run import main as train_main

    train_main(TINY + ["--model", "context_length"] + run_flags(tmp_path, "toy"))
    run_dir = tmp_path / "runs" / "toy"
    run = load_run(run_dir)
    assert isinstance(run.model, ContextLengthModel)

    # the training batches carry the field, made as its builder says
    arrays = load_corpus(run.config.data, cache_dir=tmp_path / "cache").splits["valid"]
    examples = pipeline.sentence_examples(arrays, run.config.data.seq_len)
    batch = next(iter(pipeline.model_dataset(run.model, run.config, arrays, "valid",
                                             batch_size=len(examples), examples=examples)))
    rows = examples.context
    expected = (rows[:, 3] - rows[:, 0]) - (rows[:, 2] - rows[:, 1])
    np.testing.assert_array_equal(batch["context_length"].numpy(), expected)
    assert expected.min() < expected.max()

    # evaluation: the command's perplexity is the library's, and the field moves it
    result = perplexity_main(["--run", str(run_dir)])
    documents = read_documents(result["file"])
    nll, tokens = corpus_nll(run, documents, split="test")
    assert result["nll"] == pytest.approx(nll, rel=1e-6) and result["predicted_tokens"] == tokens
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(pipeline.CONTEXT_FIELDS, "context_length", dataclasses.replace(
            pipeline.CONTEXT_FIELDS["context_length"],
            build=lambda source, spec: tf.zeros(tf.shape(source.rows)[:1], tf.float32)))
        assert corpus_nll(run, documents, split="test")[0] != pytest.approx(nll, rel=1e-6)

    # export: the SavedModel reads documents through the same field
    saved = export_main(["--run", str(run_dir), "--output-dir", str(tmp_path / "saved")])
    text = tmp_path / "docs.txt"
    text.write_text("".join("\t".join(" ".join(s) for s in d) + "\n" for d in documents))
    served = score_main(["--saved-model", str(saved), "--text-file", str(text)])
    assert served["tokens"] == tokens
    assert served["perplexity"] == pytest.approx(result["perplexity"], rel=1e-5)
