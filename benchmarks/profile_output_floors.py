"""How close the two slowest output layers are to the arithmetic they cannot avoid.

Every contender is one ``tf.function`` training step (forward, and backward to the hidden
states and every weight the loss reads) on the same hidden states [B, L, H] (normal noise)
and Zipfian targets, timed by :func:`benchmarks.harness.time_contenders` (untimed warm-up,
then rounds that time every contender once, in rotating order; median ms per step):

Topic-RNN's output (``--sections topic_rnn``; Dieng et al. 2017, Sec. 3):

``softmax matmul only``        the [N, H] x [H, V] word logits v h + c, summed: the
                               product the model cannot do without (the floor);
``softmax cross-entropy``      the same with one normaliser (a full softmax LM's output);
``Topic-RNN terms (model)``    the model's ``_target_terms`` (both normalisers, the
                               stop-word logit, B theta), normalisers sharing one exponential;
``Topic-RNN terms (two lse)``  the same with two ``reduce_logsumexp`` over [N, V], one per
                               normaliser: what the shared exponential saves.

The SDLM decoder (``--sections sdlm``; Gu et al. 2018, eq. 4-10), at the APNEWS vocabulary
with its WordNet knowledge base (or ``--knowledge-base``):

``tied softmax``               a tied full softmax, the reference of ``bench_decoders``;
``sdlm: R bilinear scores``    the R products z_r = X (g Q_r)^T, [V, N] each, summed: the
                               floor the decoder's own cost model names (R times a softmax);
``sdlm: sense scores``         eq. 5-8's exponent for all M senses (``_sense_scores_t``):
                               the floor plus the gather to senses, the sparse beta_r and
                               their products;
``sdlm: whole decoder``        ``-mean(target_log_prob)``: the above plus eq. 8-9's
                               normalisers.

The tables give each step's ms and its ratio to the section's floor; every figure is
computed in the run.

    python -m benchmarks.profile_output_floors
    python -m benchmarks.profile_output_floors --sections topic_rnn --vocab-size 10000
"""
from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (gradient_step, machine_line, print_table,
                                time_contenders, unique)
from benchmarks.sections.decoders import zipf_targets
from tcnlm_tf.errors import UserError, exit_on_user_error

SECTIONS = ("topic_rnn", "sdlm")
PROGRAM = "python -m benchmarks.profile_output_floors"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROGRAM, allow_abbrev=False,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma list out of {','.join(SECTIONS)} (default: both)")
    p.add_argument("--data-dir", default="../shared/data",
                   help="directory holding apnews/{train,valid,test}.txt, whose LM vocabulary "
                        "gives V (and, for sdlm, the WordNet knowledge base) (default: "
                        "../shared/data)")
    p.add_argument("--cache-dir", default=None,
                   help="prepared-corpus cache (default: $TCNLM_CACHE_DIR or .cache)")
    p.add_argument("--knowledge-base", default=None, metavar="PATH",
                   help="sdlm: a saved knowledge_base.npz instead of APNEWS + WordNet")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="topic_rnn: V (default: the APNEWS LM vocabulary of --data-dir)")
    p.add_argument("--batch", type=int, default=64, help="sequences B (default: 64)")
    p.add_argument("--time-steps", type=int, default=30, help="tokens per sequence L "
                                                              "(default: 30)")
    p.add_argument("--hidden", type=int, default=600, help="hidden size H (default: 600)")
    p.add_argument("--embedding-dim", type=int, default=300,
                   help="sdlm: tied embedding size (default: 300)")
    p.add_argument("--num-topics", type=int, default=50, help="topic_rnn: K (default: 50)")
    p.add_argument("--num-bases", type=int, default=5, help="sdlm: R (default: 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps each (default: 1)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (default: 5)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    if not chosen or any(s not in SECTIONS for s in chosen):
        raise UserError(f"--sections {args.sections!r}: choose from {','.join(SECTIONS)}")
    args.sections = [s for s in SECTIONS if s in chosen]
    for name in ("batch", "time_steps", "hidden", "embedding_dim", "num_topics", "num_bases",
                 "rounds"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1, got "
                            f"{getattr(args, name)}")
    if args.warmup < 0:
        raise UserError(f"--warmup must be >= 0, got {args.warmup}")
    if args.vocab_size is not None and args.vocab_size < 2:
        raise UserError(f"--vocab-size must be at least 2, got {args.vocab_size}")
    return args


def apnews_vocab_size(args) -> int:
    """The size of the APNEWS LM vocabulary of ``--data-dir`` (the models' default)."""
    from tcnlm_tf.config import DataConfig
    from tcnlm_tf.data.loading import load_corpus

    directory = Path(args.data_dir) / "apnews"
    if not (directory / "train.txt").is_file():
        raise UserError(f"no apnews corpus in {directory}: pass --data-dir DIR "
                        "(DIR/apnews/train.txt ...) or --vocab-size V")
    corpus = load_corpus(DataConfig(dataset="apnews", data_dir=str(args.data_dir)),
                         cache_dir=args.cache_dir, log=lambda m: print(m, file=sys.stderr))
    return len(corpus.lm_vocab)


def report(title: str, times: dict, floor: str) -> None:
    print(title)
    reference = times[floor]["seconds"]
    print_table(("step", "ms/step", f"x {floor}"),
                [(name, f"{t['seconds'] * 1e3:.2f}", f"{t['seconds'] / reference:.2f}x")
                 for name, t in times.items()])
    print()


def topic_rnn_section(args, vocab_size: int) -> None:
    import numpy as np
    import tensorflow as tf

    from tcnlm_tf.models.base import Context
    from tcnlm_tf.models.topic_rnn import TopicRNN

    B, L, H, K, V = args.batch, args.time_steps, args.hidden, args.num_topics, vocab_size
    rng = np.random.default_rng(args.seed)
    stop_mask = (rng.random(V) < 0.1).astype("float32")
    model = TopicRNN(V, 100, stop_mask, num_topics=K, embedding_dim=8, hidden_size=H,
                     ntm_hidden_units=(8,), name="topic_rnn")
    targets = tf.constant(zipf_targets(rng, V, (B, L), 1.0), tf.int32)
    model({"inputs": targets, "targets": targets, "bow": tf.ones([B, 3], tf.int32),
           "context_weight": tf.ones([B]), "weights": tf.ones([B, L])})
    hidden = tf.Variable(rng.normal(size=(B, L, H)).astype("float32"), name="hidden")
    theta = tf.Variable(rng.normal(size=(B, K)).astype("float32"), name="theta")
    head = [model.softmax.head_kernel, model.softmax.head_bias]
    everything = [hidden, theta] + unique(model.softmax.trainable_weights)

    def two_log_sum_exps(self, logits, bias):
        return (tf.reduce_logsumexp(logits, axis=-1),
                tf.reduce_logsumexp(logits + self._spread(bias, logits), axis=-1))

    before = types.SimpleNamespace(**{name: getattr(model, name) for name in
                                      ("softmax", "stop_mask", "_spread", "_logits")})
    before._normalisers = types.MethodType(two_log_sum_exps, model)

    def terms_loss(owner):
        def loss():
            terms = TopicRNN._target_terms(owner, hidden, targets, Context({"theta": theta}))
            return -tf.reduce_sum(terms["marginal"]) - tf.reduce_sum(terms["joint"])
        return loss

    contenders = {
        "softmax matmul only": gradient_step(
            lambda: 1e-3 * tf.reduce_sum(model.softmax(hidden, theta)["word_logits"]),
            [hidden] + head),
        "softmax cross-entropy": gradient_step(
            lambda: tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=targets, logits=model.softmax(hidden, theta)["word_logits"])),
            [hidden] + head),
        "Topic-RNN terms (now)": gradient_step(terms_loss(model), everything),
        "Topic-RNN terms (before)": gradient_step(terms_loss(before), everything),
    }
    times = time_contenders(contenders, args.warmup, args.rounds, 1)
    report(f"Topic-RNN output, forward + backward: hidden [{B}, {L}, {H}], V={V:,}, K={K}",
           times, "softmax matmul only")


def sdlm_section(args) -> None:
    import keras
    import numpy as np
    import tensorflow as tf

    from benchmarks.bench_decoders import load_knowledge_base
    from tcnlm_tf.decoders import output_layers

    kb_args = types.SimpleNamespace(knowledge_base=args.knowledge_base, data_dir=args.data_dir,
                                    min_freq=10, cache_dir=args.cache_dir)
    kb, source = load_knowledge_base(kb_args)
    V = len(kb.words)
    B, L, H, E, R = args.batch, args.time_steps, args.hidden, args.embedding_dim, args.num_bases
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    embedding = keras.layers.Embedding(V, E, name="embedding")
    embedding.build((None,))
    targets = zipf_targets(rng, V, (B, L), 1.0)
    hidden = tf.Variable(rng.normal(size=(B, L, H)).astype("float32"), name="hidden")
    softmax = output_layers.make_output_layer("softmax", {"tie": True}, V, H, embedding)
    sdlm = output_layers.make_output_layer(
        "sdlm", {"knowledge_base": kb, "num_bases": R, "normalization": "left"}, V, H,
        embedding)
    for layer in (softmax, sdlm):
        layer.target_log_prob(hidden[:1, :1], targets[:1, :1])    # builds it eagerly
    weights = [hidden] + unique(sdlm.trainable_weights)
    sense_weights = tf.constant(rng.normal(size=(sdlm.num_senses, B * L)).astype("float32"))

    def flat():
        return tf.reshape(hidden, [-1, H])

    def bilinear():
        g = flat()
        return 1e-6 * tf.add_n([tf.reduce_sum(tf.matmul(
            embedding.embeddings, tf.matmul(g, sdlm.bases[r]), transpose_b=True))
            for r in range(R)])

    contenders = {
        "tied softmax": gradient_step(
            lambda: -tf.reduce_mean(softmax.target_log_prob(hidden, targets)),
            [hidden] + unique(softmax.trainable_weights)),
        "sdlm: R bilinear scores": gradient_step(
            bilinear, [hidden, sdlm.bases, embedding.embeddings]),
        "sdlm: sense scores": gradient_step(
            lambda: 1e-3 * tf.reduce_sum(sdlm._sense_scores_t(flat()) * sense_weights),
            weights),
        "sdlm: whole decoder": gradient_step(
            lambda: -tf.reduce_mean(sdlm.target_log_prob(hidden, targets)), weights),
    }
    times = time_contenders(contenders, args.warmup, args.rounds, 1)
    report(f"SDLM decoder, forward + backward: hidden [{B}, {L}, {H}], embedding {E}, R={R}; "
           f"{source}: V={V:,}, M={sdlm.num_senses:,} senses, K={sdlm.num_sememes:,} "
           f"sememes, {sdlm.num_edges:,} edges", times, "sdlm: R bilinear scores")


@exit_on_user_error
def main(argv=None) -> None:
    args = parse_args(argv)
    print(machine_line())
    if "topic_rnn" in args.sections:
        topic_rnn_section(args, args.vocab_size or apnews_vocab_size(args))
    if "sdlm" in args.sections:
        sdlm_section(args)
    print("command: " + " ".join([PROGRAM, *(argv if argv is not None else sys.argv[1:])]))


if __name__ == "__main__":
    main()
