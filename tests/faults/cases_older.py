"""Files of an earlier version (``older-version``): the runs and export that
``tests/legacy_fixture.py`` made at an earlier commit (each evaluated, resumed, exported
and scored as it was then, within the cross-machine tolerance of
``tests/test_legacy_runs.py``), a prepared corpus whose manifest predates the stored word
counts, a checkpoint whose resume state predates the random-stream states, and hand-made
records (:func:`tests.fuzzing.write_records`)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.faults.cases_read import FRESH, RESUME, newest, prepared
from tests.faults.readers import READERS, as_good, same
from tests.faults.scene import Case, Scene, Step

#: numbers of another machine agree to this (``tests/test_legacy_runs.py``)
TOLERANCE = 1e-5


def _expected(scene: Scene) -> dict:
    return json.loads((scene.unit("legacy") / "expected.json").read_text())


def legacy_perplexity(name: str) -> Case:
    """``evaluate.perplexity`` of the earlier version's run ``name``: its number then."""
    def setup(scene: Scene) -> Step:
        run = scene.unit("legacy") / "runs" / name
        good = _expected(scene)["runs"][name]["test_perplexity"]
        return Step(["--run", str(run)], check=as_good(
            lambda r: r.returned["perplexity"], good, None, "the perplexity", TOLERANCE))
    return Case("older-version", f"legacy/runs/{name}", "evaluate.perplexity",
                "a run an earlier version trained", setup, quick=name == "tcnlm")


def legacy_resume(scene: Scene) -> Step:
    """The earlier TCNLM run resumed to step 5."""
    base = scene.unit("legacy")

    def check(result) -> str | None:
        steps = json.loads((base / "runs" / "tcnlm" / "metrics.json").read_text())["steps"]
        return None if steps == 5 else f"metrics.json says step {steps}, not 5"

    return Step(["--runs-dir", str(base / "runs"), "--run-name", "tcnlm", "--cache-dir",
                 str(scene.cache), "--resume", "--max-steps", "5"],
                outputs=("legacy/runs/tcnlm/*", "cache/*"), check=check)


def legacy_export(scene: Scene) -> Step:
    """The earlier TCNLM run exported: its scores then."""
    from tests.legacy_fixture import scores

    base, out = scene.unit("legacy"), scene.root / "exported"
    good = _expected(scene)["runs"]["tcnlm"]["scores"]

    def check(result) -> str | None:
        got = scores(result.returned)
        return None if same(got, good, TOLERANCE) else f"it scores {got}, then {good}"

    return Step(["--run", str(base / "runs" / "tcnlm"), "--output-dir", str(out)],
                check=check)


def legacy_score(scene: Scene) -> Step:
    """``evaluate.score`` through the earlier version's export: its result then."""
    base = scene.unit("legacy")
    good = _expected(scene)["score_file"]
    return Step(["--saved-model", str(base / "saved_models" / "tcnlm" / "1"), "--text-file",
                 str(base / "sentences.txt")],
                check=as_good(lambda r: r.returned, good, None, "the score", TOLERANCE))


def legacy_topics(scene: Scene) -> Step:
    run = scene.unit("legacy") / "runs" / "tcnlm"
    return Step(["--run", str(run)], outputs=("legacy/runs/tcnlm/*",))


def legacy_status(scene: Scene) -> Step:
    return Step(["--runs-dir", str(scene.unit("legacy") / "runs")])


def _counts_dropped(scene: Scene) -> Path:
    """A manifest without ``lm_counts`` (a preparation of the format before the stored
    counts), the counts files gone."""
    manifest = prepared("manifest.json")(scene)
    data = json.loads(manifest.read_text())
    for entry in data["splits"].values():
        (manifest.parent / entry.pop("lm_counts")["file"]).unlink()
    manifest.write_text(json.dumps(data, indent=1, sort_keys=True))
    return manifest


def _seedless_state(scene: Scene) -> Path:
    """The newest resume state without random-stream states (an earlier version's)."""
    import numpy as np
    path = newest("checkpoints", "resume-state-*.npz")(scene)
    with np.load(path) as saved:
        arrays = {name: saved[name] for name in saved.files if not name.startswith("seed_")}
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def older_file(target: str, reader: str, fault: str, damage) -> Case:
    def setup(scene: Scene) -> Step:
        path = damage(scene)
        step = READERS[reader](scene, path)
        step.lift = scene.restore(path.parent)
        return step
    return Case("older-version", target, reader, fault, setup)


def _record_without_size(scene: Scene) -> Path:
    """The row's record without its ``size`` (recorded before runs had one)."""
    from tests.faults.cases_write import record_older
    record_older(scene)
    return scene.unit("compare") / "records" / "tcnlm" / "metrics.json"


def handmade_records(scene: Scene) -> Step:
    from tests.fuzzing import write_records
    records = write_records(scene.root / "handmade")
    return Step(["--records", str(records / "rest"), "--output",
                 str(scene.root / "counts.md")])


def older_cases() -> list[Case]:
    names = sorted(json.loads((Path(__file__).resolve().parents[1] / "data" / "legacy"
                               / "expected.json").read_text())["runs"])
    return [legacy_perplexity(name) for name in names] + [
        Case("older-version", "legacy/runs/tcnlm", "train.run --resume",
             "a run an earlier version trained", legacy_resume),
        Case("older-version", "legacy/runs/tcnlm", "train.export",
             "a run an earlier version trained", legacy_export),
        Case("older-version", "legacy/runs/tcnlm", "evaluate.topics",
             "a run an earlier version trained", legacy_topics),
        Case("older-version", "legacy/runs", "train.status",
             "runs an earlier version trained", legacy_status),
        Case("older-version", "legacy/saved_models/tcnlm/1", "evaluate.score",
             "an export of an earlier version", legacy_score),
        older_file("cache/manifest.json", FRESH, "no stored word counts (an earlier format)",
                   _counts_dropped),
        older_file("run/checkpoints/resume-state-N.npz", RESUME,
                   "no random-stream states (an earlier version's)", _seedless_state),
        older_file("records/tcnlm/metrics.json", "evaluate.compare",
                   "no size (a record of an earlier version)", _record_without_size),
        Case("older-version", "records (hand-made)", "evaluate.topic_counts",
             "records of the shape earlier versions wrote", handmade_records),
    ]
