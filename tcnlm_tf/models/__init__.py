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
    from tcnlm_tf.data.vocab import Vocabulary
    from tcnlm_tf.models.base import LanguageModel


def build_model(config: "RunConfig", lm_vocab: "Vocabulary", topic_vocab: "Vocabulary",
                run_dir: "Path | None" = None) -> "LanguageModel":
    """A fresh, unbuilt model for ``config.model.model``, its layers under the dtype policy
    of ``config.train.precision`` (:mod:`tcnlm_tf.precision`); ``run_dir``: the run
    directory whose files the model reads (e.g. an SDLM decoder's ``knowledge_base.npz``)."""
    from tcnlm_tf.data.pipeline import CONTEXT_FIELDS
    from tcnlm_tf.data.vocab import TOPIC_SPECIALS
    from tcnlm_tf.errors import UserError
    from tcnlm_tf.precision import building

    model_class = spec_of(config.model.model).model_class()
    # every context field but a weight is made of topic-vocabulary ids
    reads = [name for name in model_class.context_inputs
             if CONTEXT_FIELDS[name].kind != "weight"]
    if reads and len(topic_vocab) <= len(TOPIC_SPECIALS):
        raise UserError(
            f"the topic-model vocabulary is empty: no non-stop-word is in at least "
            f"{config.data.topic_min_docs} training documents, and --model "
            f"{config.model.model} reads topic words ({', '.join(reads)}); lower "
            "--topic-min-docs")
    with building(config.train.precision):
        model = model_class.create(config, lm_vocab, topic_vocab, run_dir)
    model.configure_context(config.data)
    return model


__all__ = ["MODELS", "ModelSpec", "Option", "build_model", "spec_of"]
