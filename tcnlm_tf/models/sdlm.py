"""SDLM, the Sememe-Driven Language Model (Gu, Yan, Zhu, Liu, Xie, Sun, Lin, Lin, EMNLP 2018).

The paper's model is a tied LSTM language model whose softmax is replaced by the sememe-driven
decoder: a sememe predictor (eq. 4), sememe experts scoring their own senses with bilinear
functions over shared basis matrices (eq. 5, 6, 10), their sparse product over senses (eq. 7-8)
and the sum of a word's senses (eq. 9); sense output embeddings are the word input embeddings
(Sec. 3.4). The decoder is :class:`layers.sememe_decoder.SememeDecoder`, built by
:mod:`tcnlm_tf.decoders.output_layers` over the run's ``--knowledge-base`` (``synthetic`` on the
synthetic corpus, ``wordnet`` elsewhere unless given). Because it is an output layer, every
language model of the project takes it with ``--decoder sdlm`` (e.g.
``--model tcnlm --decoder sdlm``); ``--model sdlm`` is the paper's own pairing with the plain
LSTM; of its Table 1's sizes (Zaremba et al.'s medium and large, and AWD-LSTM) ``--preset
medium`` is the medium one, trained as a token stream (``--mode stream --optimizer sgd``, see
the README).
"""
from __future__ import annotations

from tcnlm_tf.models.lstm import LSTMLanguageModel


class SDLM(LSTMLanguageModel):
    """:class:`LSTMLanguageModel` with the sememe-driven decoder (``--decoder sdlm``)."""

    @classmethod
    def create(cls, config, lm_vocab, topic_vocab, run_dir=None) -> "SDLM":
        return cls(**cls.lm_arguments(config, lm_vocab, run_dir), name="sdlm")
