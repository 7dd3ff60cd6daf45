"""docs/reference is what ``python -m tools.reference`` writes from the commands' parsers:
a flag added, renamed or re-described without ``make docs`` fails here, naming the page."""
from __future__ import annotations

from pathlib import Path

from tools.commands import capture_parser, reference_commands
from tools.reference import REFERENCE_DIR, render, stale

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_reference_pages_match_the_parsers():
    problems = stale(render(), REPO_ROOT / REFERENCE_DIR)
    assert not problems, ("docs/reference is stale; run `make docs` (python -m "
                          "tools.reference) and commit the pages:\n  " + "\n  ".join(problems))


def test_reference_is_the_same_whatever_the_environment(monkeypatch, tmp_path):
    """Defaults read from $TCNLM_* and the terminal width do not reach the pages."""
    first = render()
    for name in ("TCNLM_RUNS_DIR", "TCNLM_CACHE_DIR", "TCNLM_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("COLUMNS", "37")
    assert render() == first


def test_every_command_is_captured_with_all_its_flags():
    """train.run's parser holds every model's and decoder's options; evaluate.gradients,
    which parses its own --top first, has those and train.run's."""
    commands = reference_commands()
    assert {"train.run", "train.prepare", "train.export", "train.status", "train.word2vec",
            "evaluate.compare", "benchmarks.run"} <= set(commands)
    run = capture_parser("train.run")
    flags = {flag for action in run._actions for flag in action.option_strings}
    assert {"--num-topics", "--filter-widths", "--knowledge-base", "--mixtures",
            "--runs-dir"} <= flags
    gradients = capture_parser("evaluate.gradients")
    assert {"--top"} | flags <= {flag for action in gradients._actions
                                 for flag in action.option_strings}
