"""The ``decoders`` section: the output layers ``softmax`` (tied full softmax, the
reference), ``adaptive``, ``sdlm`` and ``mos``, built with
``tcnlm_tf.decoders.output_layers.make_output_layer`` as ``benchmarks/bench_decoders.py``
builds them, at each vocabulary size of ``--vocab-sizes``.

One step is the forward and backward pass of ``-mean(layer.target_log_prob(hidden,
targets))`` for hidden states [b, l, n_h] (normal noise; b, l = ``--decoder-batch``,
``--decoder-seq-len``, smaller than the other sections' batch so that MoS's
[b, l, mixtures, V] probabilities stay small at V = 40,000; n_h and the embedding size are
the recurrent section's ``--hidden-size`` and ``--input-size``) and Zipfian targets, with
gradients for the hidden states and every trainable weight (the shared
``Embedding(V, n_x)`` included). The SDLM decoder reads a random knowledge base with the
SDLM paper's sparsity (:func:`random_knowledge_base`).
"""
from __future__ import annotations

import argparse

from benchmarks.harness import gradient_step, print_table, ratio, time_contenders, unique
from tcnlm_tf.arguments import finite_float, integer, integer_list
from tcnlm_tf.decoders.registry import decoder_spec
from tcnlm_tf.errors import UserError

#: the output layers and their reference
DECODERS = ("softmax", "adaptive", "sdlm", "mos")
REFERENCE = "softmax"
#: Gu et al. 2018, Sec. 3.3 (People's Daily with HowNet): sememe experts per word and senses
#: per sememe expert
EXPERTS_PER_WORD = 3.4
SENSES_PER_EXPERT = 22.0
#: senses per word of the random knowledge base: uniform on 1..MAX_SENSES_PER_WORD
MAX_SENSES_PER_WORD = 3
#: sememes per sense: 1 + Binomial(MAX_SEMEMES_PER_SENSE - 1, p)
MAX_SEMEMES_PER_SENSE = 3


#: the Keras backends it runs under (it times TensorFlow training steps)
BACKENDS = ("tensorflow",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    dec = parser.add_argument_group("decoders")
    dec.add_argument("--vocab-sizes", type=integer_list(2), default=[10000, 40000],
                     help="vocabulary sizes V (default: 10000,40000)")
    dec.add_argument("--decoder-batch", type=integer(1), default=16,
                     help="sequences b of the decoders' hidden states (default: 16)")
    dec.add_argument("--decoder-seq-len", type=integer(1), default=20,
                     help="steps l of the decoders' hidden states (default: 20)")
    mixtures = decoder_spec("mos").default("mixtures")
    bases = decoder_spec("sdlm").default("num_bases")
    dec.add_argument("--mixtures", type=integer(1), default=mixtures,
                     help=f"mos softmaxes (default: {mixtures})")
    dec.add_argument("--num-bases", type=integer(1), default=bases,
                     help=f"sdlm basis matrices R (default: {bases})")
    dec.add_argument("--zipf", type=finite_float, default=1.0,
                     help="exponent of the Zipfian targets (default: 1.0)")


def check(args: argparse.Namespace) -> None:
    """``--zipf`` is at least 0."""
    if not args.zipf >= 0:
        raise UserError(f"--zipf must be >= 0, got {args.zipf}")


def decoder_options(knowledge_base, cutoffs, num_bases: int, mixtures: int) -> dict:
    """The options of each of :data:`DECODERS` for ``output_layers.make_output_layer``: a tied
    softmax, the adaptive softmax with ``cutoffs``, the SDLM decoder over ``knowledge_base``
    (left normalisation, ``num_bases`` R) and MoS with ``mixtures`` softmaxes."""
    return {"softmax": {"tie": True},
            "adaptive": {"cutoffs": cutoffs},
            "sdlm": {"knowledge_base": knowledge_base, "num_bases": num_bases,
                     "normalization": "left"},
            "mos": {"mixtures": mixtures}}


def zipf_targets(rng, vocab_size: int, shape: tuple[int, ...], exponent: float):
    """Word ids of ``shape`` (int32 tensor) drawn with P(id) proportional to
    ``1 / (id + 1) ** exponent``: ids sorted by decreasing frequency, as in the vocabularies."""
    import numpy as np
    import tensorflow as tf

    weights = 1.0 / np.arange(1, vocab_size + 1) ** exponent
    return tf.constant(rng.choice(vocab_size, size=shape, p=weights / weights.sum()), tf.int32)


def random_knowledge_base(vocab_size: int, seed: int):
    """A random :class:`~tcnlm_tf.data.knowledge.KnowledgeBase` over the words ``"0".."V-1"`` with
    the sparsity Gu et al. (2018, Sec. 3.3) report for HowNet: 3.4 sememe experts per word
    and 22 senses per expert.

    Each word gets 1..3 senses (uniform, mean 2) and each sense ``1 + Binomial(2, p)``
    distinct sememes, ``p`` chosen so that a sense has ``3.4 / 2 = 1.7`` sememes on average:
    ``E ~ 3.4 V`` edges, i.e. 3.4 experts per word (sememes drawn at random rarely repeat
    within a word). The number of sememes is ``K = round(E / 22)``, so a sememe is an expert
    of 22 senses on average, and each sense draws its sememes uniformly out of the K. Equal
    sememe sets of one word are one sense (the knowledge module's rule); no sense is
    private. Deterministic in ``seed``."""
    import numpy as np

    from tcnlm_tf.data.knowledge import KnowledgeBase

    rng = np.random.default_rng(seed)
    senses_per_word = rng.integers(1, MAX_SENSES_PER_WORD + 1, size=vocab_size)
    mean_senses = (1 + MAX_SENSES_PER_WORD) / 2
    p = (EXPERTS_PER_WORD / mean_senses - 1) / (MAX_SEMEMES_PER_SENSE - 1)
    sememes_per_sense = 1 + rng.binomial(MAX_SEMEMES_PER_SENSE - 1, p,
                                         size=int(senses_per_word.sum()))
    num_sememes = max(MAX_SEMEMES_PER_SENSE,
                      round(int(sememes_per_sense.sum()) / SENSES_PER_EXPERT))
    sense_word, edge_sense, edge_sememe = [], [], []
    sizes = iter(sememes_per_sense)
    for word, count in enumerate(senses_per_word):
        sets = {tuple(sorted(rng.choice(num_sememes, size=next(sizes), replace=False)))
                for _ in range(count)}
        for sememes in sorted(sets):
            sense_word.append(word)
            edge_sense.extend([len(sense_word) - 1] * len(sememes))
            edge_sememe.extend(sememes)
    kb = KnowledgeBase(words=[str(w) for w in range(vocab_size)],
                       sense_word=np.asarray(sense_word, np.int32),
                       edge_sense=np.asarray(edge_sense, np.int32),
                       edge_sememe=np.asarray(edge_sememe, np.int32),
                       sememes=[f"sememe{k}" for k in range(num_sememes)],
                       private=np.zeros(len(sense_word), bool), source=f"random(seed={seed})")
    kb.validate()
    return kb


def run(args: argparse.Namespace) -> None:
    """Times one training step of each output layer at each V: hidden [b, l, n_h] ->
    ``-mean(target_log_prob(hidden, targets [b, l]))``, gradients for the hidden states and
    every trainable weight (the shared Embedding(V, n_x) included)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from layers.adaptive_softmax import default_cutoffs
    from tcnlm_tf.data import knowledge
    from tcnlm_tf.decoders import output_layers

    b, L, H, E = args.decoder_batch, args.decoder_seq_len, args.hidden_size, args.input_size
    print(f"decoders, forward + backward: hidden states [{b}, {L}, {H}], embedding {E}, "
          f"Zipf({args.zipf}) targets, sdlm R={args.num_bases} (left normalisation), "
          f"mos {args.mixtures} mixtures, adaptive default_cutoffs(V); knowledge base: "
          f"random with {EXPERTS_PER_WORD} experts per word and {SENSES_PER_EXPERT:g} senses "
          "per expert (the SDLM paper's)", flush=True)
    rows = []
    for V in args.vocab_sizes:
        keras.utils.set_random_seed(args.seed)
        rng = np.random.default_rng(args.seed)
        kb = random_knowledge_base(V, args.seed)
        options = decoder_options(kb, default_cutoffs(V), args.num_bases, args.mixtures)
        embedding = keras.layers.Embedding(V, E, name="embedding")
        embedding.build((None,))
        targets = zipf_targets(rng, V, (b, L), args.zipf)
        hidden = tf.Variable(rng.normal(size=(b, L, H)).astype("float32"), name="hidden")
        contenders = {}
        for name in DECODERS:
            layer = output_layers.make_output_layer(name, options[name], V, H, embedding)
            layer.target_log_prob(hidden[:1, :1], targets[:1, :1])  # builds it eagerly
            contenders[name] = gradient_step(
                lambda layer=layer: -tf.reduce_mean(layer.target_log_prob(hidden, targets)),
                [hidden] + unique(layer.trainable_weights))
        stats = knowledge.statistics(kb)
        print(f"  V={V:,}: knowledge base of {stats['senses']:,} senses, {stats['sememes']:,} "
              f"sememes, {len(kb.edge_sense):,} edges: {stats['experts_per_word']:.2f} experts "
              f"per word, {stats['senses_per_expert']:.1f} senses per expert, "
              f"{stats['senses_per_word']:.2f} senses per word, "
              f"{stats['sememes_per_sense']:.2f} sememes per sense; adaptive cutoffs "
              f"{list(options['adaptive']['cutoffs'])}", flush=True)
        times = time_contenders(contenders, args.warmup, args.rounds, args.steps)
        for name in DECODERS:
            seconds = times[name]["seconds"]
            rows.append((f"{V:,}", name, f"{seconds * 1e3:.2f}",
                         ratio(seconds, times[REFERENCE]["seconds"])))
    print_table(("V", "decoder", "ms/step", f"time x {REFERENCE}"), rows, left=2)
