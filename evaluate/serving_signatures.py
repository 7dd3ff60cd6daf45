"""What a TF Serving client sends for each call: the export's signatures (``python -m
train.export``, described in :mod:`tcnlm_tf.serving.module`) as methods that pick the
signature and build its inputs, shared by the REST client
(:class:`evaluate.serving_client.ServingClient`) and the gRPC client
(:class:`evaluate.grpc_client.GrpcServingClient`), each of which only sends a request
(:meth:`SignatureClient.predict`). Either answers every method the same way, so one can take
the other's place.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

from tcnlm_tf.errors import UserError
from tcnlm_tf.serving.mixtures import topic_mixture


class ServingError(UserError):
    """TF Serving answered with an error, or could not be reached."""


def refused(signature: str, message: str) -> ServingError:
    """The error for a ``signature`` request that TF Serving answered with ``message`` (its
    first line is kept, so the error is one line)."""
    first_line = (message.strip().splitlines() or [""])[0]
    return ServingError(f"TF Serving refused the {signature} request: {first_line}")


def sampler_inputs(count: int, prompts: Sequence[str] | None, seed: int, temperature: float,
                   top_k: int | None, top_p: float | None,
                   beam_width: int | None) -> dict[str, Any]:
    """The inputs that ``generate_sampled`` and ``generate_sampled_from_document`` take
    after their conditioning, for ``count`` sentences: ``prompts`` [count] (``""`` each when
    ``None``), ``seed``, ``temperature``, ``top_k`` (``None``: 0, off), ``top_p`` (``None``:
    1.0, off) and ``beam_width`` (``None``: 0, sampling). Raises ``UserError`` when
    ``prompts`` has another length than ``count``."""
    if prompts is not None and len(prompts) != count:
        raise UserError(f"{len(prompts)} prompts for {count} sentences: give one prompt per "
                        "sentence ('' for none)")
    return {"prompts": [""] * count if prompts is None else list(prompts), "seed": int(seed),
            "temperature": float(temperature), "top_k": int(top_k or 0),
            "top_p": 1.0 if top_p is None else float(top_p),
            "beam_width": int(beam_width or 0)}


class SignatureClient(ABC):
    """The export's signatures as methods. Each returns ``{output name: value}``, the values
    as Python lists (numbers, and strings decoded), B the batch, N the longest row, T the
    topic count; a refused request or an unreachable server raises :class:`ServingError`.
    A subclass implements :meth:`predict`."""

    @abstractmethod
    def predict(self, signature: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """Send ``inputs`` (input name -> list or scalar) to ``signature``; its outputs by
        name, as the class docstring says."""

    def score(self, sentences: Sequence[str], documents: Sequence[str] | None = None):
        """``serving_default`` (no ``documents``) or ``score``: ``tokens`` [B, N],
        ``token_log_probs`` [B, N], ``num_tokens``, ``log_likelihood`` and ``perplexity``
        [B]."""
        if documents is None:
            return self.predict("serving_default", {"sentences": list(sentences)})
        return self.predict("score", {"sentences": list(sentences),
                                      "documents": list(documents)})

    def next_words(self, context: Sequence[str], documents: Sequence[str] | None = None,
                   k: int = 10):
        """``next_words``: ``words`` and ``probabilities`` [B, k], most probable first
        (``documents``: ``""`` each when ``None``)."""
        documents = list(documents) if documents is not None else [""] * len(context)
        return self.predict("next_words", {"context": list(context), "documents": documents,
                                           "k": int(k)})

    def infer_topics(self, documents: Sequence[str]):
        """``infer_topics`` (topic models): ``topics`` [B, T]."""
        return self.predict("infer_topics", {"documents": list(documents)})

    def generate(self, topics: Sequence[Sequence[float]] | None = None, *,
                 topic: int | None = None, num_topics: int | None = None,
                 num_sentences: int | None = None, seed: int = 0, temperature: float = 0.75,
                 prompts: Sequence[str] | None = None, top_k: int | None = None,
                 top_p: float | None = None, beam_width: int | None = None):
        """Topic models: ``topics`` [B, T] rows, or ``topic`` with ``num_topics`` (one
        one-hot row, one per prompt when ``prompts`` are given); models without topics:
        ``num_sentences``, or ``prompts`` alone (one sentence each). ``temperature <= 0``
        is greedy. With none of ``prompts``, ``top_k``, ``top_p`` and ``beam_width`` it calls
        ``generate``: ``sentences`` [B], ``tokens`` [B, 40], ``num_tokens`` [B]; with any of
        them ``generate_sampled``, which adds ``log_probability`` [B]."""
        if num_sentences is not None:
            rows, count = None, int(num_sentences)
        elif topics is not None:
            rows = [list(map(float, row)) for row in topics]
            count = len(rows)
        elif topic is not None and num_topics is not None:
            count = 1 if prompts is None else len(prompts)
            rows = [topic_mixture(num_topics, topic)] * count
        elif prompts is not None:
            rows, count = None, len(prompts)
        else:
            raise UserError("generate needs topics, topic and num_topics, num_sentences or "
                            "prompts")
        if all(value is None for value in (prompts, top_k, top_p, beam_width)):
            conditioning = {"num_sentences": count} if rows is None else {"topics": rows}
            return self.predict("generate", {**conditioning, "seed": int(seed),
                                             "temperature": float(temperature)})
        conditioning = {} if rows is None else {"topics": rows}
        return self.predict("generate_sampled", {**conditioning, **sampler_inputs(
            count, prompts, seed, temperature, top_k, top_p, beam_width)})

    def generate_from_document(self, documents: Sequence[str], seed: int = 0,
                               temperature: float = 0.75, *,
                               prompts: Sequence[str] | None = None, top_k: int | None = None,
                               top_p: float | None = None, beam_width: int | None = None):
        """Topic models: a sentence conditioned on each document, as :meth:`generate` (the
        same outputs; ``generate_from_document``, or ``generate_sampled_from_document`` with
        any of ``prompts``, ``top_k``, ``top_p`` and ``beam_width``)."""
        if all(value is None for value in (prompts, top_k, top_p, beam_width)):
            return self.predict("generate_from_document", {
                "documents": list(documents), "seed": int(seed),
                "temperature": float(temperature)})
        return self.predict("generate_sampled_from_document", {
            "documents": list(documents), **sampler_inputs(
                len(documents), prompts, seed, temperature, top_k, top_p, beam_width)})
