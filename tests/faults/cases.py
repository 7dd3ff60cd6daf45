"""Every fault case, by category, and the choice of a subset."""
from __future__ import annotations

from tests.faults.cases_older import older_cases
from tests.faults.cases_read import read_cases, wrong_cases
from tests.faults.cases_write import write_cases
from tests.faults.scene import Case

#: the categories: what happens to a file the project writes, then to one it reads back
KINDS = ("disk-full", "killed", "read-only", "damaged", "removed", "truncated", "garbage",
         "wrong-contents", "older-version")


def all_cases() -> list[Case]:
    """Every case, writes first; their names are unique."""
    cases = write_cases() + read_cases() + wrong_cases() + older_cases()
    names = [case.name for case in cases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"fault cases with one name: {duplicates}")
    return cases


#: the cases of ``--quick`` beside those marked quick: one of each kind of read damage
QUICK_READS = ("truncated run/config.json evaluate.perplexity",
               "garbage cache/train-00000.h5 train.run",
               "damaged run/checkpoints/ckpt-N.data train.run --resume",
               "removed run/checkpoints/checkpoint train.run --resume",
               "wrong-contents cache/train-00000.h5 train.run id-out-of-range")


def select(kinds: set[str] | None = None, quick: bool = False,
           names: list[str] | None = None) -> list[Case]:
    """The cases of ``kinds`` (default all), with ``quick`` only the quick subset, with
    ``names`` only those whose name contains one of them."""
    chosen = [case for case in all_cases() if kinds is None or case.kind in kinds]
    if quick:
        chosen = [case for case in chosen if case.quick or case.name in QUICK_READS]
    if names:
        chosen = [case for case in chosen if any(name in case.name for name in names)]
    return chosen
