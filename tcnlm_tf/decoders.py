"""Output layers ("decoders"): the one place that turns ``--decoder`` into a Keras layer.

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
the run directory (``knowledge_base.npz``, :func:`ensure_knowledge_base`); rebuilding the
model for ``--resume``, evaluation or export reads that file, so a run never depends on the
knowledge-base source again (and the exported SavedModel carries the arrays as constants).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import keras

from tcnlm_tf import knowledge
from tcnlm_tf.baselines import target_counts
from tcnlm_tf.errors import UserError
from tcnlm_tf.vocab import load_stopwords

KNOWLEDGE_BASE_FILE = "knowledge_base.npz"


def knowledge_base_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / KNOWLEDGE_BASE_FILE


def build_run_knowledge_base(config, corpus, stopword_rule: bool = True
                             ) -> knowledge.KnowledgeBase:
    """The knowledge base of ``config.model.knowledge_base`` over ``corpus``'s LM vocabulary:
    for ``wordnet``, the words of the run's stop-word list (``config.data.stopwords``) get
    private senses unless ``stopword_rule`` is False (how runs before issue 24 built it)."""
    spec = config.model.knowledge_base
    options = {}
    if spec == "wordnet" and stopword_rule:
        options["stopwords"] = load_stopwords(config.data.stopwords)
    return knowledge.build_knowledge_base(spec, list(corpus.lm_vocab.words),
                                          synthetic_dir=corpus.source_dir, **options)


def ensure_knowledge_base(config, corpus, run_dir: Path, log: Callable[[str], None] = print
                          ) -> None:
    """For ``--decoder sdlm``: build the run's knowledge base from its LM vocabulary (and,
    for ``synthetic``, the generator's truth in the corpus directory), save it in
    ``run_dir`` and log its statistics; a run that already has one keeps it."""
    model = config.model
    path = knowledge_base_path(run_dir)
    if model.decoder != "sdlm" or path.is_file():
        return
    kb = build_run_knowledge_base(config, corpus)
    counts = target_counts(corpus.splits["train"], len(corpus.lm_vocab), config.data.line_end)
    log(f"knowledge base {model.knowledge_base}:\n"
        + knowledge.format_statistics(knowledge.statistics(kb, counts)))
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    knowledge.save(kb, path)


def output_arguments(config, lm_vocab, run_dir: Path | str | None) -> dict[str, Any]:
    """The decoder settings a :class:`~tcnlm_tf.models.lstm.RecurrentLanguageModel` takes
    (``decoder`` and ``decoder_options``), with the run's knowledge base for ``sdlm``."""
    from layers.adaptive_softmax import default_cutoffs
    m = config.model
    options: dict[str, Any] = {}
    if m.decoder == "adaptive":
        options["cutoffs"] = tuple(m.cutoffs) if m.cutoffs else default_cutoffs(len(lm_vocab))
    elif m.decoder == "softmax":
        options["tie"] = m.tie_embeddings
    elif m.decoder == "mos":
        options.update(mixtures=m.mixtures, latent_dropout=m.latent_dropout,
                       embedding_dropout=m.output_embedding_dropout)
    elif m.decoder == "sdlm":
        path = knowledge_base_path(run_dir) if run_dir is not None else None
        if path is None or not path.is_file():
            raise UserError(f"--decoder sdlm: no {KNOWLEDGE_BASE_FILE} in {run_dir}; a run "
                            "builds it when training starts (python -m train.run)")
        kb = knowledge.load(path)
        if list(kb.words) != list(lm_vocab.words):
            raise UserError(f"{path} was built for another vocabulary than {run_dir}'s "
                            "lm_vocab.txt; start a new run")
        options.update(knowledge_base=kb, num_bases=m.num_bases,
                       normalization=m.sememe_normalization,
                       embedding_dropout=m.output_embedding_dropout)
    return {"decoder": m.decoder, "decoder_options": options}


def make_output_layer(decoder: str, options: dict[str, Any], vocab_size: int, input_size: int,
                      embedding: keras.layers.Embedding) -> keras.layers.Layer:
    """The output layer: hidden [..., input_size] -> log-probabilities [..., vocab_size],
    with ``target_log_prob(hidden, targets)``; ``embedding`` is the model's input embedding
    (the tied decoders read its matrix)."""
    from layers.adaptive_softmax import AdaptiveSoftmax
    if decoder == "adaptive":
        return AdaptiveSoftmax(vocab_size, options.get("cutoffs", ()), name="softmax")
    if decoder == "softmax":
        if options.get("tie"):
            from layers.tied_softmax import TiedSoftmax
            return TiedSoftmax(input_size, embedding, name="tied_softmax")
        return AdaptiveSoftmax(vocab_size, (), name="softmax")
    if decoder == "mos":
        from layers.mixture_of_softmaxes import MixtureOfSoftmaxes
        return MixtureOfSoftmaxes(vocab_size, num_mixtures=options["mixtures"],
                                  embedding=embedding,
                                  latent_dropout=options.get("latent_dropout", 0.0),
                                  embedding_dropout=options.get("embedding_dropout", 0.0),
                                  name="mos")
    if decoder == "sdlm":
        from layers.sememe_decoder import SememeDecoder
        kb = options["knowledge_base"]
        return SememeDecoder(vocab_size, kb.sense_word, kb.edge_sense, kb.edge_sememe,
                             num_sememes=len(kb.sememes), num_bases=options["num_bases"],
                             normalization=options["normalization"], embedding=embedding,
                             embedding_dropout=options.get("embedding_dropout", 0.0),
                             name="sememe_decoder")
    raise ValueError(f"unknown decoder {decoder!r}")
