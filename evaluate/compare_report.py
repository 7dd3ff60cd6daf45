"""The tables and the learning-curve plot of ``python -m evaluate.compare``.

A comparison trains one run per (row, topic count, seed, learning rate): :class:`RunKey`.
:func:`aggregate` turns their ``metrics.json`` into one entry per (row, topic count): the
learning rate with the best mean validation perplexity (when several were searched), then the
mean and standard deviation over seeds. :func:`table` writes them as Markdown with the
ratios to the sentence-level LSTM (row ``lstm``) and the document-level LSTM
(``lstm-document``), and each topic row's NPMI and topic diversity; :func:`coherence_table` is
the TCNLM paper's Table 4 shape (NPMI by topic count), :func:`diversity_table` the same shape
for the topic diversity; :func:`ablation_table` sets each topic row's test perplexity beside
the ones with another document's and with uninformative topics; :func:`curves_png` plots
validation perplexity against training tokens for every run.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Callable

from evaluate.common import png_bytes
from evaluate.intervals import SAMPLES, Interval, document_scores, paired_bootstrap
from tcnlm_tf.metrics.coherence import CONVENTIONS, DIVERSITY_NS, convention_of
from tcnlm_tf.runs.provenance import commits

SENTENCE_LSTM, DOCUMENT_LSTM = "lstm", "lstm-document"
#: the header of the topic-diversity columns: the share of distinct words among all topics'
#: top N words (Dieng et al. 2020), at each N of DIVERSITY_NS
DIVERSITY_HEADER = f"topic diversity (top {' / '.join(map(str, DIVERSITY_NS))})"


@dataclasses.dataclass(frozen=True)
class RunKey:
    """One training run of a comparison: the row, its topic count (None: the row has no
    ``--num-topics`` or pins its own), seed and learning rate (None: train.run's)."""

    row: str
    topics: int | None
    seed: int
    learning_rate: float | None

    def name(self, topic_counts: int, seeds: int, learning_rates: int) -> str:
        """The run directory name: the row, then ``-T<T>``, ``-seed<S>``, ``-lr<LR>`` where
        the comparison has more than one of each (a single-valued comparison keeps the
        plain row names of earlier versions)."""
        name = self.row
        if self.topics is not None and topic_counts > 1:
            name += f"-T{self.topics}"
        if seeds > 1:
            name += f"-seed{self.seed}"
        if self.learning_rate is not None and learning_rates > 1:
            name += f"-lr{self.learning_rate:g}"
        return name


def training_tokens(metrics: dict) -> list[float]:
    """Cumulative training tokens at the end of each epoch of a run."""
    per_epoch = metrics.get("train_tokens_per_epoch")
    total, points = 0.0, []
    for epoch in metrics["epochs"]:
        total += per_epoch if per_epoch else epoch["tokens_per_sec"] * epoch["seconds"]
        points.append(total)
    return points


def tokens_per_second(metrics: dict) -> float:
    """Training tokens/s over the run's epochs (their tokens over their seconds)."""
    seconds = sum(e["seconds"] for e in metrics["epochs"])
    tokens = sum(e["tokens_per_sec"] * e["seconds"] for e in metrics["epochs"])
    return tokens / seconds if seconds else float("nan")


def stop_reason(metrics: dict, fixed_epochs: int | None) -> str:
    """How the run's training ended, for the table."""
    if fixed_epochs is not None:
        return f"fixed budget ({fixed_epochs} epochs)"
    return {"early_stopping": "patience", "epochs": "epoch cap"}.get(metrics.get("stopped"),
                                                                     str(metrics.get("stopped")))


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def aggregate(runs: dict[RunKey, dict], fixed: dict[str, int]) -> dict[tuple, dict]:
    """One entry per (row, topics), in the order of ``runs``: the runs of the chosen
    learning rate (best mean validation perplexity over seeds) and their statistics."""
    groups: dict[tuple, dict[float | None, list[tuple[RunKey, dict]]]] = {}
    for key, metrics in runs.items():
        groups.setdefault((key.row, key.topics), {}).setdefault(
            key.learning_rate, []).append((key, metrics))
    entries = {}
    for (row, topics), by_rate in groups.items():
        rate = min(by_rate, key=lambda r: statistics.fmean(
            m["best_valid_perplexity"] for _, m in by_rate[r]))
        chosen = by_rate[rate]
        metrics = [m for _, m in chosen]
        test = _mean_std([m["test_perplexity"] for m in metrics])
        coherence = [m["coherence"]["mean"] for m in metrics if "coherence" in m]
        # a coherence scored without the diversity (an older record's) adds none
        diversity = {n: [m["coherence"]["diversity"][str(n)] for m in metrics
                         if str(n) in m.get("coherence", {}).get("diversity", {})]
                     for n in DIVERSITY_NS}
        conventions = sorted({convention_of(m["coherence"]) for m in metrics
                              if "coherence" in m})
        ablations = ({source: statistics.fmean(m["ablations"][source] for m in metrics)
                      for source in metrics[0]["ablations"]}
                     if all("ablations" in m for m in metrics) else None)
        documents = [document_scores(m) for m in metrics]
        entries[(row, topics)] = {
            "row": row, "topics": topics, "learning_rate": rate,
            "documents": documents if all(d is not None for d in documents) else None,
            "commits": sorted({c for m in metrics for c in commits(m)}),
            "searched": sorted(r for r in by_rate if r is not None),
            "seeds": [k.seed for k, _ in chosen], "size": metrics[0]["size"],
            "parameters": metrics[0]["parameters"],
            "epochs": [len(m["epochs"]) for m in metrics],
            "stopped": [stop_reason(m, fixed.get(row)) for m in metrics],
            "tokens_per_sec": statistics.fmean(tokens_per_second(m) for m in metrics),
            "valid": _mean_std([m["best_valid_perplexity"] for m in metrics]),
            "test": test,
            "npmi": _mean_std(coherence) if coherence else None,
            "npmi_convention": "/".join(conventions) or None,
            "diversity": {n: _mean_std(values) for n, values in diversity.items() if values},
            "ablations": ablations,
        }
    return entries


def _number(value: tuple[float, float | None], digits: int = 2) -> str:
    mean, std = value
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _npmi(entry: dict) -> str:
    """The NPMI cell: mean (± std over seeds), its convention named when not the default."""
    if not entry["npmi"]:
        return "-"
    text = _number(entry["npmi"], 4)
    convention = entry["npmi_convention"]
    return text if convention == CONVENTIONS[0] else f"{text} ({convention})"


def _diversity(entry: dict) -> str:
    """The topic-diversity cell: at each N of :data:`DIVERSITY_NS` (mean ± std over seeds),
    joined by " / "; "-" for a row without topics, or whose records have no diversity."""
    return " / ".join(_number(entry["diversity"][n], 3) if n in entry["diversity"] else "-"
                      for n in DIVERSITY_NS) if entry["diversity"] else "-"


def _convention_note(entries: dict[tuple, dict]) -> list[str]:
    """The line explaining "(limit)" NPMI cells ("(limit/toolkit)": seeds of both), where the
    table has one."""
    if all(e["npmi_convention"] == CONVENTIONS[0] for e in entries.values() if e["npmi"]):
        return []
    return ["\nNPMI marked (limit) was recorded under the earlier convention (whole windows "
            "only; a pair never seen together scores -1, not the toolkit's 0; "
            "`evaluate.coherence --convention`), and the run is not here to score again; "
            "(limit/toolkit) averages seeds recorded under each."]


def _counted(labels: list) -> str:
    """'patience' / 'patience ×2, epoch cap ×1' for the seeds of a row."""
    counts: dict[str, int] = {}
    for label in map(str, labels):
        counts[label] = counts.get(label, 0) + 1
    if len(labels) == 1:
        return str(labels[0])
    return ", ".join(f"{label} ×{n}" for label, n in counts.items())


def _reference(entries: dict[tuple, dict], row: str) -> float | None:
    matches = [e["test"][0] for (r, _), e in entries.items() if r == row]
    return matches[0] if matches else None


def commit_cell(trained_by: list[str]) -> str:
    """The commit cell: the short commits ``trained_by`` (:func:`commits`) that trained a
    row's runs ("-": recorded before runs named theirs)."""
    return ", ".join(commit[:7] + ("+dirty" if commit.endswith("+dirty") else "")
                     for commit in trained_by) or "-"


def intervals(entries: dict[tuple, dict], reference: str) -> dict[tuple, Interval]:
    """The paired bootstrap interval (:func:`evaluate.intervals.paired_bootstrap`) of every
    entry's test-perplexity ratio to the entry of row ``reference`` (its first topic count),
    for the entries whose runs all recorded per-document scores; empty when the reference
    has none."""
    keys = [key for key, e in entries.items() if e["documents"] is not None]
    base = next((key for key in keys if key[0] == reference), None)
    if base is None:
        return {}
    return paired_bootstrap({key: entries[key]["documents"] for key in keys}, base)


def table(entries: dict[tuple, dict], baselines: dict[str, float | None],
          reference: str = DOCUMENT_LSTM) -> str:
    """The comparison as a Markdown table (test perplexity mean ± standard deviation over
    seeds where there are several), with the ratios to the sentence-level and the
    document-level LSTM, each row's paired bootstrap 95 % interval of its ratio to the row
    ``reference`` (:func:`intervals`), the commits that trained it, and the oracle/unigram
    baselines."""
    sentence, document = _reference(entries, SENTENCE_LSTM), _reference(entries, DOCUMENT_LSTM)
    ratio = lambda value, ref: f"{value / ref:.3f}" if ref else "-"   # noqa: E731
    bounds = intervals(entries, reference)
    lines = ["| model | size | parameters | learning rate | epochs | stopped | train tokens/s | "
             "best valid ppl | test ppl | / sentence LSTM | / document LSTM | "
             f"/ {reference} [95 % CI] | NPMI (mean of top 5/10/15/20) | "
             f"{DIVERSITY_HEADER} | commit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
             "| --- | --- |"]
    for key, e in entries.items():
        rate = "default" if e["learning_rate"] is None else f"{e['learning_rate']:g}"
        if len(e["searched"]) > 1:
            rate += f" (best of {', '.join(f'{r:g}' for r in e['searched'])})"
        npmi = _npmi(e)
        lines.append(
            f"| {e['row']} | {e['size']} | {e['parameters']:,} | {rate} | "
            f"{'/'.join(map(str, e['epochs']))} | {_counted(e['stopped'])} | "
            f"{e['tokens_per_sec']:,.0f} | {_number(e['valid'])} | {_number(e['test'])} | "
            f"{ratio(e['test'][0], sentence)} | {ratio(e['test'][0], document)} | "
            f"{bounds.get(key, '-')} | {npmi} | {_diversity(e)} | "
            f"{commit_cell(e['commits'])} |")
    names = {"unigram": "unigram (add-one, train split)", "oracle": "oracle (true generator)"}
    for key, label in names.items():
        value = baselines.get(key)
        if value is not None:
            lines.append(f"| {label} | - | - | - | - | - | - | - | {value:.2f} | "
                         f"{ratio(value, sentence)} | {ratio(value, document)} | - | - | - "
                         "| - |")
    lines += _convention_note(entries)
    seeds = max(len(e["seeds"]) for e in entries.values())
    if seeds > 1:
        lines.append(f"\n± is the standard deviation over {seeds} seeds; epochs and "
                     "stopping are listed per seed.")
    if bounds:
        lines.append(f"\n[95 % CI]: the paired bootstrap interval of the ratio to {reference} "
                     f"({SAMPLES:,} replicates resampling the test documents, the same for "
                     "both rows, and each row's seeds; `evaluate.intervals`); a row without "
                     "per-document scores in its records shows -. An interval that holds 1 "
                     "is no difference.")
    return "\n".join(lines) + "\n"


def _by_topic_count(entries: dict[tuple, dict], key: str,
                    cell: Callable[[dict], str]) -> list[str] | None:
    """The lines of a table of ``cell(entry)`` per row and topic count, over the topic
    counts at which some entry has ``key``; None with fewer than two such counts."""
    counts = sorted({t for (_, t), e in entries.items() if t is not None and e[key]})
    if len(counts) < 2:
        return None
    rows = list(dict.fromkeys(r for (r, t), e in entries.items() if t is not None))
    lines = ["| model | " + " | ".join(f"T = {t}" for t in counts) + " |",
             "| --- |" + " --- |" * len(counts)]
    for row in rows:
        cells = [cell(entries[(row, t)]) if (row, t) in entries else "-" for t in counts]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def coherence_table(entries: dict[tuple, dict]) -> str | None:
    """NPMI by topic count (the TCNLM paper's Table 4 shape), or None with fewer than two
    topic counts."""
    lines = _by_topic_count(entries, "npmi", _npmi)
    return None if lines is None else "\n".join(lines + _convention_note(entries)) + "\n"


def diversity_table(entries: dict[tuple, dict]) -> str | None:
    """Topic diversity (top 10 / top 25 words) by topic count, beside
    :func:`coherence_table`: coherent topics that repeat each other's words show here; None
    with fewer than two topic counts."""
    lines = _by_topic_count(entries, "diversity", _diversity)
    return None if lines is None else "\n".join(lines) + "\n"


def topic_label(entry: dict) -> str:
    """``row, T=n``: the comparison's topic count, or for a row that keeps its own (e.g. the
    naive MoE's 30 experts) the ``T=n`` of its size."""
    if entry["topics"] is not None:
        return f"{entry['row']}, T={entry['topics']}"
    own = [part for part in entry["size"].split(", ") if part.startswith("T=")]
    return ", ".join([entry["row"], *own])


#: the ablation table's columns: ablation name, header
ABLATION_COLUMNS = (("shuffled", "another document's topics"),
                    ("uniform", "uninformative topics"),
                    ("preceding", "the preceding text only"))


def ablation_table(entries: dict[tuple, dict]) -> str | None:
    """Test perplexity (mean over seeds) with the model's own topics, another document's
    (shuffled) and uninformative ones (``uniform``: proportions 1/T, Topic-RNN's theta at its
    prior mean 0) and, where a row was trained under ``rest``, with only the text before each
    sentence as its context (``preceding``; the column only when some row has it), with each
    ablation's ratio to the own; None without ablations."""
    rows = [e for e in entries.values() if e["ablations"]]
    if not rows:
        return None
    columns = [(name, header) for name, header in ABLATION_COLUMNS
               if any(name in e["ablations"] for e in rows)]
    lines = ["| model | own topics | " + " | ".join(h for _, h in columns) + " |",
             "| --- | --- | " + " | ".join("---" for _ in columns) + " |"]
    for e in rows:
        own = e["test"][0]
        cells = [f"{e['ablations'][s]:.2f} ({e['ablations'][s] / own:.3f}×)"
                 if s in e["ablations"] else "-" for s, _ in columns]
        lines.append(f"| {topic_label(e)} | {own:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def curves(runs: dict[str, dict]) -> dict[str, list[tuple[float, float]]]:
    """Run name -> [(cumulative training tokens, validation perplexity)] per epoch."""
    return {name: list(zip(training_tokens(m), (e["valid_perplexity"] for e in m["epochs"])))
            for name, m in runs.items()}


#: line styles and markers of the curves, one pair per round of the 10-colour cycle, so
#: that no two of up to 40 runs look alike
CURVE_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))


def curve_style(index: int) -> dict[str, str]:
    """``ax.plot`` keywords of the ``index``-th curve: the colour cycle's colour, and a line
    style and marker that change each time the 10 colours come round again."""
    line, marker = CURVE_STYLES[index // 10 % len(CURVE_STYLES)]
    return {"color": f"C{index % 10}", "linestyle": line, "marker": marker}


def curves_png(points: dict[str, list[tuple[float, float]]], title: str) -> bytes:
    """PNG bytes: validation perplexity (log scale) against training tokens, one line per run
    (:func:`curve_style`)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for index, (name, series) in enumerate(points.items()):
        finite = [(x, y) for x, y in series if math.isfinite(y)]
        if finite:
            ax.plot(*zip(*finite), markersize=3, label=name, **curve_style(index))
    ax.set_yscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel("validation perplexity")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return png_bytes(fig)


def write_tensorboard(directory: Any, points: dict[str, list[tuple[float, float]]],
                      png: bytes) -> None:
    """``<directory>/<run>/``: scalar ``compare/valid_perplexity`` at step = training tokens,
    one TensorBoard run per comparison run (so they overlay), and the PNG as image
    ``compare/valid_curves`` under ``<directory>/plot``."""
    import tensorflow as tf

    for name, series in points.items():
        writer = tf.summary.create_file_writer(str(directory / name))
        with writer.as_default():
            for tokens, perplexity in series:
                tf.summary.scalar("compare/valid_perplexity", perplexity, step=int(tokens))
        writer.close()
    writer = tf.summary.create_file_writer(str(directory / "plot"))
    with writer.as_default():
        tf.summary.image("compare/valid_curves", tf.image.decode_png(png, channels=4)[None],
                         step=0)
    writer.close()
