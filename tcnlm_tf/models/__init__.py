"""Model assembly: :func:`build_model` maps a :class:`~tcnlm_tf.config.ModelConfig` to a model.

Each entry of :data:`MODELS` builds one ``--model`` choice from the config and the prepared
corpus's vocabulary sizes. Later models register here the same way.
"""
from __future__ import annotations

from typing import Callable

from layers.adaptive_softmax import default_cutoffs
from tcnlm_tf.config import MODEL_NAMES, ModelConfig
from tcnlm_tf.models.base import LanguageModel, ModelOutput
from tcnlm_tf.models.lstm import LSTMLanguageModel, RecurrentLanguageModel
from tcnlm_tf.models.topic_guided import TCNLM, NaiveMoE, TopicGuidedLanguageModel


def output_cutoffs(config: ModelConfig, vocab_size: int) -> tuple[int, ...]:
    """Adaptive-softmax cutoffs: the configured ones, the default rule, or () for full."""
    if config.softmax == "full":
        return ()
    return tuple(config.cutoffs) if config.cutoffs else default_cutoffs(vocab_size)


def _lstm(config: ModelConfig, lm_vocab_size: int, topic_vocab_size: int) -> LanguageModel:
    return LSTMLanguageModel(
        vocab_size=lm_vocab_size, embedding_dim=config.embedding_dim,
        hidden_size=config.hidden_size, num_layers=config.num_layers, dropout=config.dropout,
        cutoffs=output_cutoffs(config, lm_vocab_size), tie_embeddings=config.tie_embeddings,
        name="lstm_lm")


def _topic_guided(cls, config: ModelConfig, lm_vocab_size: int, topic_vocab_size: int,
                  **extra) -> LanguageModel:
    return cls(
        vocab_size=lm_vocab_size, topic_vocab_size=topic_vocab_size,
        num_topics=config.num_topics, ntm_hidden_units=tuple(config.ntm_hidden_units),
        diversity_weight=config.diversity_weight, topic_word_scale=config.topic_word_scale,
        embedding_dim=config.embedding_dim,
        hidden_size=config.hidden_size, num_layers=config.num_layers, dropout=config.dropout,
        cutoffs=output_cutoffs(config, lm_vocab_size), tie_embeddings=config.tie_embeddings,
        name=config.model, **extra)


def _tcnlm(config: ModelConfig, lm_vocab_size: int, topic_vocab_size: int) -> LanguageModel:
    return _topic_guided(TCNLM, config, lm_vocab_size, topic_vocab_size,
                         num_factors=config.num_factors or config.hidden_size,
                         topic_kernel_scale=config.topic_kernel_scale)


def _moe(config: ModelConfig, lm_vocab_size: int, topic_vocab_size: int) -> LanguageModel:
    return _topic_guided(NaiveMoE, config, lm_vocab_size, topic_vocab_size)


MODELS: dict[str, Callable[[ModelConfig, int, int], LanguageModel]] = {
    "lstm": _lstm,
    "tcnlm": _tcnlm,
    "moe": _moe,
}
assert set(MODELS) == set(MODEL_NAMES), "tcnlm_tf.config.MODEL_NAMES must list every model"


def build_model(config: ModelConfig, lm_vocab_size: int, topic_vocab_size: int) -> LanguageModel:
    """A fresh, unbuilt model for ``config.model``."""
    return MODELS[config.model](config, lm_vocab_size, topic_vocab_size)


__all__ = ["MODELS", "TCNLM", "LanguageModel", "LSTMLanguageModel", "ModelOutput", "NaiveMoE",
           "RecurrentLanguageModel", "TopicGuidedLanguageModel", "build_model", "output_cutoffs"]
