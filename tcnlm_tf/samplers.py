"""How ``generate`` picks each word, named as KerasHub names its samplers.

========================  =========================================================
``GreedySampler()``       the most probable word at each step
``RandomSampler(t)``      a word drawn from p^(1/t) renormalised
``TopKSampler(k, t)``     drawn among the k most probable words only
``TopPSampler(p, t, k)``  drawn among the smallest set of most probable words whose
                          probability reaches p (nucleus sampling, Holtzman et al.
                          2020), after an optional top-k cut
``BeamSampler(n)``        beam search with n beams: the most probable sentence found
========================  =========================================================

``get_sampler("top_k")`` gives a sampler by its name with KerasHub's defaults (k 5, p 0.1,
5 beams, temperature 1). A sampler's :meth:`~Sampler.inputs` are the scalar inputs of the
exported ``generate_sampled`` signatures (``temperature``, ``top_k``, ``top_p``,
``beam_width``), so the Python API and a TF Serving client ask the same thing. Pure Python.
"""
from __future__ import annotations

import dataclasses
import math

from tcnlm_tf.errors import UserError

#: the most beams one request may ask for (tcnlm_tf.serving.generation.MAX_BEAM_WIDTH)
MAX_BEAMS = 32


@dataclasses.dataclass(frozen=True)
class Sampler:
    """Base: what a sampler sends to the generator."""

    def inputs(self) -> dict[str, float | int]:
        """``temperature`` (<= 0: greedy), ``top_k`` (0: off), ``top_p`` (1: off) and
        ``beam_width`` (0: sampling) of the ``generate_sampled`` signatures."""
        raise NotImplementedError


def _positive_temperature(temperature: float) -> None:
    if not (math.isfinite(temperature) and temperature > 0):
        raise UserError(f"temperature {temperature} must be a positive finite number (use "
                        "GreedySampler for the most probable word)")


@dataclasses.dataclass(frozen=True)
class GreedySampler(Sampler):
    def inputs(self):
        return {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "beam_width": 0}


@dataclasses.dataclass(frozen=True)
class RandomSampler(Sampler):
    temperature: float = 1.0

    def __post_init__(self):
        _positive_temperature(self.temperature)

    def inputs(self):
        return {"temperature": float(self.temperature), "top_k": 0, "top_p": 1.0,
                "beam_width": 0}


@dataclasses.dataclass(frozen=True)
class TopKSampler(Sampler):
    k: int = 5
    temperature: float = 1.0

    def __post_init__(self):
        if int(self.k) < 1:
            raise UserError(f"TopKSampler k={self.k}: k must be at least 1")
        _positive_temperature(self.temperature)

    def inputs(self):
        return {"temperature": float(self.temperature), "top_k": int(self.k), "top_p": 1.0,
                "beam_width": 0}


@dataclasses.dataclass(frozen=True)
class TopPSampler(Sampler):
    p: float = 0.1
    temperature: float = 1.0
    k: int | None = None

    def __post_init__(self):
        if not 0.0 < self.p <= 1.0:
            raise UserError(f"TopPSampler p={self.p}: p must be in (0, 1]")
        if self.k is not None and int(self.k) < 1:
            raise UserError(f"TopPSampler k={self.k}: k must be at least 1 (or None)")
        _positive_temperature(self.temperature)

    def inputs(self):
        return {"temperature": float(self.temperature), "top_k": int(self.k or 0),
                "top_p": float(self.p), "beam_width": 0}


@dataclasses.dataclass(frozen=True)
class BeamSampler(Sampler):
    num_beams: int = 5

    def __post_init__(self):
        if not 1 <= int(self.num_beams) <= MAX_BEAMS:
            raise UserError(f"BeamSampler num_beams={self.num_beams}: give 1 to {MAX_BEAMS}")

    def inputs(self):
        return {"temperature": 0.0, "top_k": 0, "top_p": 1.0,
                "beam_width": int(self.num_beams)}


#: sampler names, as KerasHub's ``keras_hub.samplers.get`` takes them
SAMPLERS = {"greedy": GreedySampler, "random": RandomSampler, "top_k": TopKSampler,
            "top_p": TopPSampler, "beam": BeamSampler}


def get_sampler(sampler: str | Sampler) -> Sampler:
    """``sampler`` itself, or the sampler of that name with its defaults."""
    if isinstance(sampler, Sampler):
        return sampler
    if sampler not in SAMPLERS:
        raise UserError(f"unknown sampler {sampler!r}: choose one of {', '.join(SAMPLERS)} "
                        "or pass a sampler object (tcnlm_tf.samplers)")
    return SAMPLERS[sampler]()
