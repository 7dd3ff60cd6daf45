"""Output layers ("decoders"): what turns ``--decoder`` into a Keras layer, one
:class:`Decoder` per entry of :data:`tcnlm_tf.decoders.registry.DECODERS`.

Every language model of the project ends in one of them (``RecurrentLanguageModel.
make_output_layer``), so the decoder is orthogonal to how a model uses its document context:

``adaptive``  adaptive softmax (Grave et al. 2016; TCNLM's output layer), or a full softmax
              below 1,000 words (:func:`layers.adaptive_softmax.default_cutoffs`);
``softmax``   a full softmax; ``--tie-embeddings`` makes its word vectors the input
              embedding (Inan et al. 2017; Press and Wolf 2017);
``sdlm``      the sememe-driven decoder of Gu et al. 2018 (eq. 4-10,
              :class:`layers.sememe_decoder.SememeDecoder`), tied to the input embedding
              (their Sec. 3.4), over the ``--knowledge-base`` of the run;
``mos``       a mixture of ``--mixtures`` softmaxes (Yang et al. 2018,
              :class:`layers.mixture_of_softmaxes.MixtureOfSoftmaxes`), tied to the input
              embedding (the SDLM paper applies MoS and SDLM only to tied models).

An ``sdlm`` run builds its knowledge base once, from the run's LM vocabulary, and keeps it in
the run directory (``knowledge_base.npz``, :meth:`SememeDrivenDecoder.prepare_run`); rebuilding the
model for ``--resume``, evaluation or export reads that file, so a run never depends on the
knowledge-base source again (and the exported SavedModel carries the arrays as constants).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import keras

from tcnlm_tf.data import knowledge
from tcnlm_tf.data.vocab import load_stopwords
from tcnlm_tf.decoders.registry import decoder_spec
from tcnlm_tf.errors import UserError
from tcnlm_tf.metrics.baselines import target_counts

KNOWLEDGE_BASE_FILE = "knowledge_base.npz"


def knowledge_base_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / KNOWLEDGE_BASE_FILE


def build_run_knowledge_base(config, corpus, stopword_rule: bool = True
                             ) -> knowledge.KnowledgeBase:
    """The knowledge base of the run's ``--knowledge-base`` over ``corpus``'s LM vocabulary:
    for ``wordnet``, the words of the run's stop-word list (``config.data.stopwords``) get
    private senses unless ``stopword_rule`` is False (the knowledge base without that rule,
    which ``evaluate.knowledge_base`` sets beside it)."""
    spec = config.model.decoder_option("knowledge_base")
    options = {}
    if spec == "wordnet" and stopword_rule:
        options["stopwords"] = load_stopwords(config.data.stopwords)
    return knowledge.build_knowledge_base(spec, list(corpus.lm_vocab.words),
                                          synthetic_dir=corpus.source_dir, **options)


class Decoder:
    """How a registered decoder (a :class:`~tcnlm_tf.decoders.registry.DecoderSpec`'s
    ``target``) is made: subclasses implement :meth:`build` and, where they need them, the
    other hooks."""

    @classmethod
    def build(cls, options: Mapping[str, Any], vocab_size: int, input_size: int,
              embedding: keras.layers.Embedding) -> keras.layers.Layer:
        """The output layer: hidden [..., input_size] -> log-probabilities [..., vocab_size],
        with ``target_log_prob(hidden, targets, training=False)``; ``options``: the layer's
        settings (:meth:`layer_options`); ``embedding``: the model's input embedding (a tied
        decoder reads its matrix)."""
        raise NotImplementedError

    @classmethod
    def layer_options(cls, options: Mapping[str, Any], lm_vocab, run_dir: Path | None
                      ) -> dict[str, Any]:
        """The settings :meth:`build` takes, from the run's decoder options ``options`` (every
        option of the spec, defaults filled in), its LM vocabulary and run directory: the
        options as they are by default."""
        return dict(options)

    @classmethod
    def prepare_run(cls, config, corpus, run_dir: Path, log: Callable[[str], None]) -> None:
        """One-off work of a fresh run before its model is first built (what it writes to
        ``run_dir`` is what :meth:`layer_options` reads back on every rebuild): nothing by
        default."""


class AdaptiveDecoder(Decoder):
    """``adaptive``: :class:`layers.adaptive_softmax.AdaptiveSoftmax` with the run's
    ``cutoffs`` (default: :func:`layers.adaptive_softmax.default_cutoffs` of the vocabulary;
    layer option ``cutoffs``, ``()``: a full softmax)."""

    @classmethod
    def layer_options(cls, options, lm_vocab, run_dir):
        from layers.adaptive_softmax import default_cutoffs
        cutoffs = options["cutoffs"]
        return {"cutoffs": tuple(cutoffs) if cutoffs else default_cutoffs(len(lm_vocab))}

    @classmethod
    def build(cls, options, vocab_size, input_size, embedding):
        from layers.adaptive_softmax import AdaptiveSoftmax
        return AdaptiveSoftmax(vocab_size, options.get("cutoffs", ()), name="softmax")


class SoftmaxDecoder(Decoder):
    """``softmax``: a full softmax, or with ``tie`` (``--tie-embeddings``)
    :class:`layers.tied_softmax.TiedSoftmax` over the input embedding."""

    @classmethod
    def layer_options(cls, options, lm_vocab, run_dir):
        return {"tie": options["tie_embeddings"]}

    @classmethod
    def build(cls, options, vocab_size, input_size, embedding):
        if options.get("tie"):
            from layers.tied_softmax import TiedSoftmax
            return TiedSoftmax(input_size, embedding, name="tied_softmax")
        from layers.adaptive_softmax import AdaptiveSoftmax
        return AdaptiveSoftmax(vocab_size, (), name="softmax")


class MixtureOfSoftmaxesDecoder(Decoder):
    """``mos``: :class:`layers.mixture_of_softmaxes.MixtureOfSoftmaxes` (layer options
    ``mixtures``, ``latent_dropout``, ``embedding_dropout``)."""

    @classmethod
    def layer_options(cls, options, lm_vocab, run_dir):
        return {"mixtures": options["mixtures"], "latent_dropout": options["latent_dropout"],
                "embedding_dropout": options["output_embedding_dropout"]}

    @classmethod
    def build(cls, options, vocab_size, input_size, embedding):
        from layers.mixture_of_softmaxes import MixtureOfSoftmaxes
        return MixtureOfSoftmaxes(vocab_size, num_mixtures=options["mixtures"],
                                  embedding=embedding,
                                  latent_dropout=options.get("latent_dropout", 0.0),
                                  embedding_dropout=options.get("embedding_dropout", 0.0),
                                  name="mos")


class SememeDrivenDecoder(Decoder):
    """``sdlm``: :class:`layers.sememe_decoder.SememeDecoder` over the run's knowledge base
    (layer options ``knowledge_base``, a :class:`~tcnlm_tf.data.knowledge.KnowledgeBase`,
    ``num_bases``, ``normalization``, ``embedding_dropout``)."""

    @classmethod
    def prepare_run(cls, config, corpus, run_dir, log):
        """Build the run's knowledge base from its LM vocabulary (and, for ``synthetic``, the
        generator's truth in the corpus directory), save it in ``run_dir`` and log its
        statistics; a run that already has one keeps it."""
        path = knowledge_base_path(run_dir)
        if path.is_file():
            return
        kb = build_run_knowledge_base(config, corpus)
        counts = target_counts(corpus.splits["train"], len(corpus.lm_vocab),
                               config.data.line_end)
        log(f"knowledge base {config.model.decoder_option('knowledge_base')}:\n"
            + knowledge.format_statistics(knowledge.statistics(kb, counts)))
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        knowledge.save(kb, path)

    @classmethod
    def layer_options(cls, options, lm_vocab, run_dir):
        path = knowledge_base_path(run_dir) if run_dir is not None else None
        if path is None or not path.is_file():
            raise UserError(f"--decoder sdlm: no {KNOWLEDGE_BASE_FILE} in {run_dir}; a run "
                            "builds it when training starts (python -m train.run)")
        kb = knowledge.load(path)
        if list(kb.words) != list(lm_vocab.words):
            raise UserError(f"{path} was built for another vocabulary than {run_dir}'s "
                            "lm_vocab.txt; start a new run")
        return {"knowledge_base": kb, "num_bases": options["num_bases"],
                "normalization": options["sememe_normalization"],
                "embedding_dropout": options["output_embedding_dropout"]}

    @classmethod
    def build(cls, options, vocab_size, input_size, embedding):
        from layers.sememe_decoder import SememeDecoder
        kb = options["knowledge_base"]
        return SememeDecoder(vocab_size, kb.sense_word, kb.edge_sense, kb.edge_sememe,
                             num_sememes=len(kb.sememes), num_bases=options["num_bases"],
                             normalization=options["normalization"], embedding=embedding,
                             embedding_dropout=options.get("embedding_dropout", 0.0),
                             name="sememe_decoder")


def _decoder(name: str) -> type[Decoder]:
    return decoder_spec(name).decoder_class()


def prepare_run(config, corpus, run_dir: Path, log: Callable[[str], None] = print) -> None:
    """The one-off work of a fresh run's decoder (:meth:`Decoder.prepare_run`)."""
    _decoder(config.model.decoder).prepare_run(config, corpus, run_dir, log)


def output_arguments(config, lm_vocab, run_dir: Path | str | None) -> dict[str, Any]:
    """The decoder settings a :class:`~tcnlm_tf.models.lstm.RecurrentLanguageModel` takes
    (``decoder`` and ``decoder_options``, :meth:`Decoder.layer_options`)."""
    m = config.model
    options = {option.name: m.decoder_option(option.name)
               for option in decoder_spec(m.decoder).options}
    run_dir = Path(run_dir) if run_dir is not None else None
    return {"decoder": m.decoder,
            "decoder_options": _decoder(m.decoder).layer_options(options, lm_vocab, run_dir)}


def make_output_layer(decoder: str, options: Mapping[str, Any], vocab_size: int,
                      input_size: int, embedding: keras.layers.Embedding) -> keras.layers.Layer:
    """The output layer of ``decoder`` (:meth:`Decoder.build`)."""
    return _decoder(decoder).build(options, vocab_size, input_size, embedding)
