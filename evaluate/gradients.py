"""``python -m evaluate.gradients [train.run flags]``: the global norm of a fresh model's first
training gradient, over the stored weights and over the weights the model uses (a scaled
weight's gradient divided by its scale, what the clip sees), with the weights that make up
most of each: how ``--topic-word-scale`` and ``--topic-kernel-scale`` inflate the stored
gradients. The model is measured before its one-off preparation (LDA+LSTM's LDA is not
fitted, TDLM's embeddings are not loaded)."""
from __future__ import annotations

import argparse

import numpy as np

from tcnlm_tf.arguments import integer
from tcnlm_tf.errors import UserError, exit_on_user_error


def norm_shares(grads: list, names: list[str], top: int) -> tuple[float, list[tuple[str, float]]]:
    """(global norm, the ``top`` weights by share of its square) of ``grads``, summed in
    float64 (a float32 gradient's squares can overflow where the gradient does not).
    A gradient with an inf or NaN in it is a :class:`UserError` naming its weights."""
    values = [np.asarray(g.numpy(), dtype=np.float64) for g in grads]
    broken = [name for name, v in zip(names, values) if not np.all(np.isfinite(v))]
    if broken:
        raise UserError(f"the first training gradient is not finite (inf or NaN) in "
                        f"{', '.join(broken[:3])}{' and more' if len(broken) > 3 else ''}: the "
                        "model diverges at these settings; lower the scales or the sizes")
    squares = [float(np.square(v).sum()) for v in values]
    total = sum(squares)
    ranked = sorted(zip(names, squares), key=lambda item: -item[1])[:top]
    return total ** 0.5, [(name, square / total if total else 0.0) for name, square in ranked]


@exit_on_user_error
def main(argv: list[str] | None = None) -> dict:
    from tcnlm_tf.cli.command_line import build_parser, config_from_args

    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--top", type=integer(1), default=3, help="weights listed per norm (3)")
    known, rest = own.parse_known_args(argv)
    parser = build_parser()
    parser.prog = "python -m evaluate.gradients"
    parser.description = __doc__.split(": ", 1)[1]
    args = parser.parse_args(rest)
    if args.resume:
        raise UserError("evaluate.gradients measures a fresh model; drop --resume")
    if args.embeddings:       # it would be the gradient of another model than asked for
        raise UserError("evaluate.gradients measures a model before its one-off preparation, "
                        "which is where --embeddings would load the word vectors: drop it")
    import tensorflow as tf

    from tcnlm_tf.data import pipeline
    from tcnlm_tf.data.loading import load_corpus
    from tcnlm_tf.models import build_model

    config = config_from_args(args)
    config.validate()
    tf.keras.utils.set_random_seed(config.train.seed)
    corpus = load_corpus(config.data, cache_dir=args.cache_dir)
    model = build_model(config, corpus.lm_vocab, corpus.topic_vocab)
    dataset = pipeline.model_dataset(model, config, corpus.splits["train"], "train",
                                     shuffle_seed=config.train.seed * 1000)
    batch = next(iter(dataset))
    model(batch, training=False)
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        terms = model.loss_terms(batch, training=True)
        loss = (terms["nll_sum"] + terms["aux_loss"]) / terms["tokens"]
    grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
             for g, v in zip(tape.gradient(loss, variables), variables)]
    scales = model.weight_scales(variables)
    names = [v.path for v in variables]
    result = {}
    for label, values in (("stored", grads), ("used", [g / s for g, s in zip(grads, scales)])):
        norm, shares = norm_shares(values, names, known.top)
        result[label] = {"norm": norm, "shares": shares}
        print(f"{label} weights: global norm {norm:.4f}; "
              + ", ".join(f"{name} {share:.1%}" for name, share in shares))
    return result


if __name__ == "__main__":
    main()
