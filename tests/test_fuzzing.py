"""Every option of a checked type (numbers, lists, KEY=VALUE) of every command, with
non-finite, zero, negative and huge values, run as the command line runs
it by :mod:`tests.fuzzing`: each ends in a one-line error or a result, none in a traceback
or a hang, and no refused case changes a trained run. (``python -m tests.fuzzing`` runs
every option, paths and names included, and lets the training commands train.)"""
from collections import Counter

import pytest

from tests.fuzzing import BAD, fuzz

#: trains tiny runs or exports: `make test` runs it, `make test-fast` leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return fuzz(tmp_path_factory.mktemp("fuzz"), timeout=60, quick=True, typed_only=True)


def test_no_value_ends_in_a_traceback_a_hang_or_a_changed_run(outcomes):
    bad = [f"{o.case.command} {o.case.option}={o.case.value}: {o.kind}: {o.detail}"
           for o in outcomes if o.kind in BAD]
    assert not bad, "\n".join(bad)
    kinds = Counter(o.kind for o in outcomes)
    assert kinds["refused"] > 500 and kinds["ran"] > 20, kinds
    assert {o.case.command for o in outcomes} == {   # every command with a typed option
        "train.run", "train.prepare", "train.word2vec", "benchmarks.run",
        "evaluate.compare", "evaluate.coherence", "evaluate.curve", "evaluate.generate",
        "evaluate.gradients",
        "evaluate.infer", "evaluate.knowledge_base", "evaluate.perplexity", "evaluate.score",
        "evaluate.serving_client next-words", "evaluate.serving_client generate",
        "evaluate.serving_client score", "evaluate.serving_client topics", "evaluate.topics"}


@pytest.mark.parametrize("command,option,value", [
    ("evaluate.coherence", "--window", "99999999999999999999"),   # was an OverflowError
    ("evaluate.infer", "--samples", "99999999999999999999"),      # ran for ever
    ("evaluate.infer", "--samples", "-1"),                        # ran as 0
    ("train.word2vec", "--dim", "2147483648"),                    # reached gensim
    ("benchmarks.run", "--hidden-size", "99999999999999999999"),
    ("evaluate.gradients", "--top", "99999999999999999999"),
])
def test_values_found_by_fuzzing_are_refused_by_the_flag(outcomes, command, option, value):
    """Cases the first fuzzing run found: each now ends in argparse's error for the flag."""
    found = [o for o in outcomes
             if (o.case.command, o.case.option, o.case.value) == (command, option, value)]
    assert len(found) == 1 and found[0].kind == "refused", found
    assert f"argument {option}: expected an integer from" in found[0].detail
