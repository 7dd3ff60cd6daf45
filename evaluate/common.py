"""Pieces shared by the ``evaluate`` command-line tools."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterator

from tcnlm_tf.data.corpus import FORMAT_DESCRIPTION, Document, ReadStats, iter_corpus_file
from tcnlm_tf.errors import UserError

#: the settings in which comparisons whose records one table joins may differ: where the
#: corpus was, and the rows' budgets (each line says how its row stopped)
MAY_DIFFER = ("data_dir", "fixed_budget", "max_epochs")


def parser(prog: str, description: str, epilog: str = "",
           corpus: bool = True) -> argparse.ArgumentParser:
    """An argument parser with the ``--run`` every evaluator takes, and with ``corpus`` the
    ``--data-dir`` of those that rebuild the run (:func:`tcnlm_tf.runs.loading.load_run`)."""
    p = argparse.ArgumentParser(prog=f"python -m evaluate.{prog}", description=description,
                                epilog=epilog, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True,
                   help="run directory made by `python -m train.run` (runs/<name>)")
    if corpus:
        p.add_argument("--data-dir", type=Path, default=None,
                       help="where the run's corpus is now, "
                            "DIR/<dataset>/{train,valid,test}.txt, if it moved (default: "
                            "where the run was trained from, else $TCNLM_DATA_DIR)")
    return p


def read_documents(path: Path) -> list[Document]:
    """Documents of a corpus-format file; skipped lines are reported, no documents is an error."""
    return list(stream_documents(path))


def stream_documents(path: Path) -> Iterator[Document]:
    """The documents of a corpus-format file one at a time (for a file larger than
    memory), reported as :func:`read_documents` reports them once it has read them all."""
    from tcnlm_tf.data.loading import LiteralCounter
    stats, literals = ReadStats(), LiteralCounter()
    for line, document in iter_corpus_file(path, stats):
        literals.add(line, document)
        yield document
    for line in stats.problems(Path(path)) + literals.notices(path):
        print(line)
    if not stats.documents:
        raise UserError(f"{path} holds no usable document ({FORMAT_DESCRIPTION})")


def split_file(run, split: str) -> Path:
    """The run's own corpus file for ``split`` (the synthetic corpus is regenerated if needed)."""
    from tcnlm_tf.data.loading import source_dir
    return source_dir(run.config.data) / f"{split}.txt"


def row_of(name: str) -> str | None:
    """The ``evaluate.compare`` row a run name belongs to (a run name is its row, then
    suffixes such as ``-T100`` or ``-seed1``), or None."""
    from tcnlm_tf.models.registry import compare_rows

    matches = [row for row in compare_rows() if name == row or name.startswith(row + "-")]
    return max(matches, key=len) if matches else None


def row_order(name: str) -> tuple[int, str]:
    """Sort key: run names in the comparison's row order (``lstm``, ``lstm-document``,
    ``tcnlm``, ...), unknown ones last."""
    from tcnlm_tf.models.registry import compare_rows

    rows, row = list(compare_rows()), row_of(name)
    return (rows.index(row) if row else len(rows), name)


def png_bytes(fig) -> bytes:
    """A matplotlib figure as PNG bytes (120 dpi), the figure closed."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()


def read_record(path: Path, what: str) -> dict:
    """A JSON file of an ``evaluate.compare`` record (``compare.json``, a row's
    ``metrics.json`` or ``config.json``) as a dict; a :class:`UserError` that names the file
    and the option ``what`` that led to it where it is not a JSON object."""
    from tcnlm_tf.runs.directory import read_json_object

    try:
        return read_json_object(path, "restore it (git checkout -- FILE, for a committed "
                                      "record) or remove that record")
    except UserError as err:
        raise UserError(f"{what}: {err}") from None


def emit(text: str, output: Path | None) -> str:
    """Prints a records command's Markdown ``text`` and writes it to ``output`` if given;
    returns ``text``."""
    from tcnlm_tf.data.corpus import write_text

    if output:
        write_text(output, text)
    print(text + (f"\nwritten to {output}" if output else ""))
    return text


def records_parser(prog: str, description: str, example: str,
                   output_help: str) -> argparse.ArgumentParser:
    """The parser of a command that reads ``evaluate.compare`` records, with its ``--output``
    (a Markdown file)."""
    p = argparse.ArgumentParser(prog=f"python -m evaluate.{prog}", description=description,
                                epilog=f"example: python -m evaluate.{prog} {example}",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("--output", type=Path, default=None, help=output_help)
    return p
