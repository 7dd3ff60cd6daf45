"""``python -m train.export --run runs/<name>``: a SavedModel for TF Serving.

Writes ``saved_models/<name>/<version>/``, TF Serving's numbered-version layout: the version
is one more than the highest already there (1 for the first export), so a running server
that watches ``saved_models/<name>`` picks the new one up. The signatures, with string
inputs and the vocabulary lookups inside the graph, are described in
:mod:`tcnlm_tf.serving.module`; list them with ``saved_model_cli show --all --dir <version dir>``.
The export computes in float32 whatever ``--precision`` the run trained in. Each version
holds TF Serving's warm-up requests, ``assets.extra/tf_serving_warmup_requests``: one request
per signature, which the server answers before the version serves
(:mod:`tcnlm_tf.serving.warmup`). The export serves; it keeps no custom gradient function
(``tf.saved_model.SaveOptions(experimental_custom_gradients=False)``): differentiate the
run's Keras model, not the SavedModel.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.runs.directory import RunDirectory


#: the largest version TF Serving reads (an int64)
MAX_VERSION = 2**63 - 1


def next_version(model_dir: Path) -> int:
    """One more than the highest numbered version directory in ``model_dir`` (1 if none):
    names of ASCII digits only (``str.isdigit`` also takes ``²``, which is no number); a
    number past :data:`MAX_VERSION` is a :class:`UserError`."""
    from tcnlm_tf.serving.api import version_number

    versions = [number for p in model_dir.iterdir()
                if p.is_dir() and (number := version_number(p.name)) is not None] \
        if model_dir.is_dir() else []
    highest = max(versions, default=0)
    if highest >= MAX_VERSION:
        raise UserError(f"{model_dir / str(highest)}: a version number TF Serving cannot read "
                        f"or follow (it reads versions up to {MAX_VERSION}); rename or remove "
                        "that folder, or export under another --name")
    return highest + 1


def export(run_dir: Path, output_dir: Path, name: str | None = None) -> Path:
    """Export the run in ``run_dir`` to ``output_dir/<name>/<next version>``; returns it."""
    import tensorflow as tf

    from tcnlm_tf.data.vocab import LM_SPECIALS
    from tcnlm_tf.runs.loading import load_run
    from tcnlm_tf.runs.lock import try_lock
    from tcnlm_tf.serving.module import ServingModule
    from tcnlm_tf.serving.warmup import sample_text, write_warmup_requests

    # float32 whatever precision the run trained in: a serving machine need not compute
    # bfloat16 or float16 fast, and the weights are float32 anyway
    run = load_run(run_dir, precision="float32")
    module = ServingModule(run)
    model_dir = output_dir / (name or run.directory.name)
    print(f"exporting {run.checkpoint} ({run.config.model.model}, {run.config.model.mode} "
          f"mode) ...", flush=True)
    signatures = module.signatures()
    try:
        # one export at a time picks a version of this model: a second one waits, then
        # takes the next number (the lock file sits beside the model directory, which
        # holds only versions, as TF Serving expects)
        with try_lock(output_dir, wait=True, name=f".{model_dir.name}.lock"):
            # what a killed export left (none is being written: this one holds the lock)
            for stale in sorted(model_dir.glob("*.partial")) if model_dir.is_dir() else []:
                print(f"removing {stale}, left by an export that did not finish", flush=True)
                shutil.rmtree(stale)
            target = model_dir / str(next_version(model_dir))
            partial = target.with_name(target.name + ".partial")
            try:
                # serving computes no gradient: the custom gradients of the recurrence and
                # the sememe decoder are left out (tracing them took a fifth of the export)
                tf.saved_model.save(module, str(partial), signatures=signatures,
                                    options=tf.saved_model.SaveOptions(
                                        experimental_custom_gradients=False))
                write_warmup_requests(partial, model_dir.name, signatures,
                                      sample_text(run.lm_vocab.words, LM_SPECIALS))
                partial.rename(target)    # TF Serving never sees a half-written version
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)   # no files for a later version
                raise
    except (OSError, tf.errors.OpError) as error:
        reason = getattr(error, "message", None) or error.strerror or str(error)
        raise UserError(f"cannot write the export under {model_dir}: {reason}; choose a "
                        "writable --output-dir") from None
    return target


@exit_on_user_error
def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(allow_abbrev=False,
        prog="python -m train.export", description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m train.export --run runs/synthetic-tcnlm\n"
               "  saved_model_cli show --all --dir saved_models/synthetic-tcnlm/1")
    p.add_argument("--run", type=Path, required=True,
                   help="run directory made by `python -m train.run` (runs/<name>)")
    p.add_argument("--output-dir", type=Path, default=Path("saved_models"),
                   help="where model directories go (default: saved_models)")
    p.add_argument("--name", help="model name, the directory under --output-dir "
                                  "(default: the run's name)")
    args = p.parse_args(argv)
    if args.name is not None and (not args.name or "/" in args.name or args.name in (".", "..")):
        raise UserError(f"--name {args.name!r} must be a plain directory name")
    if not RunDirectory(args.run).config.is_file():   # before the slow TensorFlow import
        raise UserError(f"run directory {args.run} not found (no config.json): pass --run "
                        "runs/<name> as created by `python -m train.run`")
    target = export(args.run, args.output_dir, args.name)
    print(f"SavedModel: {target}\n"
          f"signatures: saved_model_cli show --all --dir {target}\n"
          "serve: see docs/serving.md")
    return target


if __name__ == "__main__":
    main()
