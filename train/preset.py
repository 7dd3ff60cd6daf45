"""``python -m train.preset --run runs/<name> --output presets/<name>``: a trained run as a
preset directory in KerasHub's layout (config.json, metadata.json, model.weights.h5 and the
vocabularies and model files under assets/), the form of a published pre-trained model.
``tcnlm_tf.load(<preset>)`` reads it on any machine, without the run directory or the
corpus; see :mod:`tcnlm_tf.serving.preset`."""
from __future__ import annotations

import argparse
from pathlib import Path

from tcnlm_tf.errors import UserError, exit_on_user_error
from tcnlm_tf.runs.directory import RunDirectory


@exit_on_user_error
def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m train.preset",
        description=__doc__.split(": ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m train.preset --run runs/synthetic-tcnlm "
               "--output presets/synthetic-tcnlm\n"
               "  python -c \"import tcnlm_tf; print(tcnlm_tf.load('presets/synthetic-tcnlm'))\"")
    p.add_argument("--run", type=Path, required=True,
                   help="run directory made by `python -m train.run` (runs/<name>)")
    p.add_argument("--output", type=Path, required=True,
                   help="the preset directory to write (must not exist yet, or be empty)")
    args = p.parse_args(argv)
    if not RunDirectory(args.run).config.is_file():   # before the slow TensorFlow import
        raise UserError(f"run directory {args.run} not found (no config.json): pass --run "
                        "runs/<name> as created by `python -m train.run`")
    from tcnlm_tf.runs.loading import load_run
    from tcnlm_tf.serving.preset import save_preset

    # float32 weights whatever precision the run trained in (they are float32 anyway)
    run = load_run(args.run, precision="float32")
    target = save_preset(run, args.output)
    print(f"preset of {run.checkpoint} ({run.config.model.model}): {target}\n"
          f"load it with tcnlm_tf.load({str(target)!r})")
    return target


if __name__ == "__main__":
    main()
