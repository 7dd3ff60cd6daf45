"""Argument types shared by the command-line tools: each refuses a value the command cannot
use with argparse's own one-line error (``argument --flag: ...``, exit 2) before any work,
so no command meets a non-finite number, an integer past what TensorFlow's int32 shapes
and NumPy's seeds take, or a count below its least sensible value."""
from __future__ import annotations

import argparse
import math
import re
from typing import Callable

#: the largest integer setting (a size, count or step): TensorFlow's int32 shapes
MAX_INTEGER = 2 ** 31 - 1
#: NumPy's seed range, [0, 2^32)
MAX_SEED = 2 ** 32 - 1


#: a corpus's name (--dataset): its folder under the data directory, one path component
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def dataset_name(text: str) -> str:
    """A corpus's name: the papers' (``apnews``, ...) or the folder of one's own corpus under
    ``--data-dir`` (letters, digits, ``_``, ``.``, ``-``; not a path)."""
    if not DATASET_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a corpus name: name the folder under --data-dir that holds "
            "train.txt, valid.txt and test.txt (letters, digits, _ . -; no /)")
    return text


def finite_float(text: str) -> float:
    """A finite number: ``inf``, ``nan`` and values that overflow a double (``1e999``) are
    refused, so no option can carry a non-finite value into a run."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def probability(text: str) -> float:
    """A number in (0, 1] (a share of probability mass, such as top-p's p)."""
    value = finite_float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def int_list(text: str) -> list[int]:
    """'256,256' -> [256, 256]."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def integer(minimum: int, maximum: int = MAX_INTEGER) -> Callable[[str], int]:
    """An integer in [``minimum``, ``maximum``] (sizes and counts: ``integer(1)``; a count
    that may be none: ``integer(0)``; a seed: :data:`random_seed`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"expected an integer from {minimum:,} to {maximum:,}, got {text!r}")
        return value

    return parse


#: a random seed: NumPy's range
random_seed = integer(0, MAX_SEED)


def integer_list(minimum: int, maximum: int = MAX_INTEGER) -> Callable[[str], list[int]]:
    """'50,100' -> [50, 100]: one or more comma-separated integers, each as :func:`integer`
    takes it."""
    item = integer(minimum, maximum)

    def parse(text: str) -> list[int]:
        values = [item(x) for x in text.split(",") if x.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
        return values

    return parse
