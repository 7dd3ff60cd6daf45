"""Does the SDLM sememe predictor q_k = sigmoid(g^T v_k + b_k) (Gu et al. 2018 eq. 4) say
which sememe the next word carries? A toy task where the answer depends on the context.

``--groups`` K groups of ``--words-per-group`` words; each word has one sense with two
sememes: its group's and one "broad" sememe every word carries. A context g is its group's
fixed random centre plus noise, and the target is a uniformly chosen word of that group, so
the best loss is log(words per group). The decoder alone (``layers.sememe_decoder``, R = 5,
left normalisation, its own embeddings) is trained with Adam, from the SDLM authors'
initialisation (``tied_lstm_rnn.py``: v_k uniform in +-0.1, the bases Q_r in +-0.05, the
basis logits in +-0.1, b_k 0; the layer's default) and from the one this project used before
(Glorot-uniform v_k and Q_r, zero basis logits). Every ``--report`` steps it prints,
on held-out contexts, the mean q_k of the context's own group sememe, of the other groups'
sememes and of the broad one, and the same for the probability that the next word's sense
carries the sememe (``SememeDecoder.carried_sememe_probs``, eq. 8 summed over the sememe's
senses). Seeded; runs in about a minute on 2 CPU cores."""
from __future__ import annotations

import argparse

import numpy as np


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.probe_sememe_gates",
                                allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--words-per-group", type=int, default=6)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--report", type=int, default=200)
    args = p.parse_args(argv)
    import tensorflow as tf

    from layers.sememe_decoder import SememeDecoder

    K, per, H = args.groups, args.words_per_group, args.hidden
    V = K * per
    rng = np.random.default_rng(0)
    group_of = np.repeat(np.arange(K), per)
    edges = [(w, group_of[w]) for w in range(V)] + [(w, K) for w in range(V)]
    centres = rng.normal(size=(K, H)).astype("float32")

    def contexts(n):
        groups = rng.integers(0, K, size=n)
        g = (centres[groups] + 0.5 * rng.normal(size=(n, H))).astype("float32")
        return g, groups, groups * per + rng.integers(0, per, size=n)

    train_g, _, train_t = contexts(4096)
    test_g, test_groups, _ = contexts(1000)
    print(f"best loss log({per}) = {np.log(per):.3f}; columns: own group's sememe / the other "
          "groups' (mean) / the broad sememe")
    for init in ("glorot", "authors"):
        tf.keras.utils.set_random_seed(1)
        layer = SememeDecoder(V, list(range(V)), [s for s, _ in edges], [k for _, k in edges],
                              K + 1, embedding_dim=16)
        layer.build((None, H))
        if init == "glorot":
            r = np.random.default_rng(2)
            for weight, fan in ((layer.sememe_kernel, H + K + 1), (layer.bases, H + 16)):
                limit = np.sqrt(6.0 / fan)
                weight.assign(r.uniform(-limit, limit, weight.shape))
            layer.basis_logits.assign(np.zeros(layer.basis_logits.shape))
        optimizer = tf.keras.optimizers.Adam(1e-2)
        batches = np.random.default_rng(3)
        for step in range(args.steps + 1):
            if step % args.report == 0:
                rows = np.arange(len(test_g))
                cells = []
                for values in (layer.sememe_probs(test_g).numpy(),
                               layer.carried_sememe_probs(test_g).numpy()):
                    own = values[rows, test_groups]
                    other = (values[:, :K].sum(1) - own) / (K - 1)
                    cells.append(f"{own.mean():.3f} / {other.mean():.3f} / "
                                 f"{values[:, K].mean():.3f}")
                print(f"{init} initialisation, step {step:4d}: q_k {cells[0]}   "
                      f"P(carried) {cells[1]}")
            if step == args.steps:
                break
            index = batches.integers(0, len(train_g), 256)
            with tf.GradientTape() as tape:
                loss = -tf.reduce_mean(layer.target_log_prob(train_g[index], train_t[index]))
            grads = tape.gradient(loss, layer.trainable_weights)
            optimizer.apply_gradients(zip(grads, layer.trainable_weights))


if __name__ == "__main__":
    main()
