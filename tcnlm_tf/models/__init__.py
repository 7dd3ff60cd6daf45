"""Model assembly: :func:`build_model` builds the model a run's configuration names.

The registry (:mod:`tcnlm_tf.models.registry`) says which class implements each ``--model``
choice; the class's ``create`` reads its settings from the configuration and the run's
vocabularies. This package imports TensorFlow only when a model is built.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tcnlm_tf.models.registry import MODELS, ModelSpec, Option, spec_of

if TYPE_CHECKING:
    from pathlib import Path

    from tcnlm_tf.config import RunConfig
    from tcnlm_tf.models.base import LanguageModel
    from tcnlm_tf.vocab import Vocabulary


def build_model(config: "RunConfig", lm_vocab: "Vocabulary", topic_vocab: "Vocabulary",
                run_dir: "Path | None" = None) -> "LanguageModel":
    """A fresh, unbuilt model for ``config.model.model``, its layers under the dtype policy
    of ``config.train.precision`` (:mod:`tcnlm_tf.precision`); ``run_dir``: the run
    directory whose files the model reads (e.g. an SDLM decoder's ``knowledge_base.npz``)."""
    from tcnlm_tf.precision import building

    with building(config.train.precision):
        return spec_of(config.model.model).model_class().create(config, lm_vocab, topic_vocab,
                                                                run_dir)


__all__ = ["MODELS", "ModelSpec", "Option", "build_model", "spec_of"]
