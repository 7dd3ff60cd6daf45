"""Plain-PyTorch peers of the project's language-model training step, for the ``peers``
section of ``python -m benchmarks.run`` (:mod:`benchmarks.sections.peers`): the model a
PyTorch user would write from ``torch.nn`` parts for the same configuration, its training
step, and the matrix-product peak of PyTorch on this machine. Nothing here imports
TensorFlow or the project's models; every size comes from the project's ``RunConfig``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional

#: the torch.autocast dtype of each project precision the peers section times
AUTOCAST = {"float32": None, "mixed_bfloat16": torch.bfloat16}


class PeerLM(nn.Module):
    """embedding [V, E] -> dropout -> ``nn.LSTM`` (``num_layers`` x H, dropout between the
    layers) -> dropout -> output layer, as ``tcnlm_tf.models.lstm.LSTMLanguageModel`` is
    laid out. ``output``: ``"softmax"`` (``nn.Linear(H, V)``), ``"tied"`` (the same, its
    weight the embedding; needs E = H) or ``"adaptive"``
    (``nn.AdaptiveLogSoftmaxWithLoss(H, V, cutoffs, div_value=4.0, head_bias=True)``, the
    tail projections of ``layers.adaptive_softmax.AdaptiveSoftmax``: H / 4^(i+1) units).

    :meth:`loss` takes time-major int64 ``inputs``/``targets`` [L, B] and float ``weights``
    [L, B] (0 at padding) and returns the weighted mean of the targets' negative
    log-likelihoods; the output layer runs at the positions of positive weight only, as the
    project's step runs it."""

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int,
                 num_layers: int, dropout: float, output: str,
                 cutoffs: tuple[int, ...] = ()):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.rnn = nn.LSTM(embedding_dim, hidden_size, num_layers,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.output = output
        if output == "adaptive":
            self.decoder = nn.AdaptiveLogSoftmaxWithLoss(hidden_size, vocab_size, list(cutoffs),
                                                         div_value=4.0, head_bias=True)
        else:
            self.decoder = nn.Linear(hidden_size, vocab_size)
            if output == "tied":
                self.decoder.weight = self.embedding.weight

    def loss(self, inputs: torch.Tensor, targets: torch.Tensor,
             weights: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.drop(self.embedding(inputs)))
        flat_weights = weights.reshape(-1)
        scored = flat_weights > 0
        hidden = self.drop(hidden).reshape(-1, hidden.shape[-1])[scored]
        flat_targets, flat_weights = targets.reshape(-1)[scored], flat_weights[scored]
        if self.output == "adaptive":
            nll = -self.decoder(hidden, flat_targets).output
        else:
            nll = functional.cross_entropy(self.decoder(hidden), flat_targets,
                                           reduction="none")
        return (nll.float() * flat_weights).sum() / flat_weights.sum().clamp(min=1.0)


def peer_model(config, vocab_size: int, cutoffs: tuple[int, ...]) -> PeerLM:
    """The :class:`PeerLM` of a project ``RunConfig`` (its model section) over
    ``vocab_size`` words; ``cutoffs`` are the project's adaptive-softmax cutoffs (used for
    ``--decoder adaptive`` only)."""
    m = config.model
    if m.decoder == "adaptive":
        output = "adaptive"
    elif m.decoder == "softmax":
        output = "tied" if m.decoder_option("tie_embeddings") else "softmax"
    else:
        raise ValueError(f"no PyTorch peer for --decoder {m.decoder}")
    return PeerLM(vocab_size, m.embedding_dim, m.hidden_size, m.num_layers, m.dropout, output,
                  cutoffs)


def peer_optimizer(config, model: nn.Module) -> torch.optim.Optimizer:
    """``torch.optim.SGD`` or ``torch.optim.Adam`` at the config's learning rate (the
    project's ``--optimizer`` and ``--learning-rate``)."""
    t = config.train
    if t.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=t.learning_rate)
    return torch.optim.Adam(model.parameters(), lr=t.learning_rate)


def torch_batches(batches: list[dict[str, np.ndarray]]
                  ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    """The project's batches (``inputs``, ``targets``, ``weights`` [B, L] as numpy) as
    time-major tensors [L, B] (``nn.LSTM``'s own layout), with each batch's token count."""
    return [(torch.from_numpy(b["inputs"].T.astype(np.int64)).contiguous(),
             torch.from_numpy(b["targets"].T.astype(np.int64)).contiguous(),
             torch.from_numpy(b["weights"].T.astype(np.float32)).contiguous(),
             float(b["weights"].sum())) for b in batches]


def training_step(config, model: PeerLM, batches: list[dict[str, np.ndarray]],
                  precision: str) -> Callable[[int], float]:
    """A contender of :func:`benchmarks.harness.time_contenders`: step ``i`` trains ``model``
    on batch ``i`` modulo their number: gradients zeroed, forward pass and loss under
    ``torch.autocast("cpu", dtype=torch.bfloat16)`` for ``mixed_bfloat16`` (float32
    weights, float32 optimiser), backward, ``clip_grad_norm_`` to the config's
    ``clip_norm``, optimiser step. Returns the batch's tokens."""
    optimizer = peer_optimizer(config, model)
    data = torch_batches(batches)
    dtype = AUTOCAST[precision]
    clip = config.train.clip_norm
    model.train()

    def step(i: int) -> float:
        inputs, targets, weights, tokens = data[i % len(data)]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = model.loss(inputs, targets, weights)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        loss.item()
        return tokens

    return step


def matmul_step(size: int, precision: str, seed: int) -> Callable[[int], float]:
    """A contender: one ``torch.mm`` of two [size, size] matrices in float32, or in
    bfloat16 for ``mixed_bfloat16``; returns its floating-point operations, 2 size^3."""
    generator = torch.Generator().manual_seed(seed)
    dtype = AUTOCAST[precision] or torch.float32
    a = torch.randn(size, size, generator=generator).to(dtype)
    b = torch.randn(size, size, generator=generator).to(dtype)

    def step(_: int) -> float:
        torch.mm(a, b)
        return 2.0 * size ** 3

    return step
