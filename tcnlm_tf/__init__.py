"""tcnlm_tf: topic-guided neural language models (TCNLM, TDLM, SDLM and baselines) in Keras 3.

Project-specific pieces live here, grouped by concern: corpora, vocabularies and input
pipelines (:mod:`tcnlm_tf.data`), the models (:mod:`tcnlm_tf.models`), their output layers
(:mod:`tcnlm_tf.decoders`), run directories and checkpoints (:mod:`tcnlm_tf.runs`), what is
measured (:mod:`tcnlm_tf.metrics`), export and generation (:mod:`tcnlm_tf.serving`) and the
``train.run`` command line (:mod:`tcnlm_tf.cli`); the run configuration
(:mod:`tcnlm_tf.config`) and the small modules every part uses (errors, argument types, model
and decoder options, numeric precision) sit at the top. Reusable Keras layers live in the
top-level ``layers`` package. :func:`load` is the Python API's front door
(:mod:`tcnlm_tf.serving.api`). Importing the package quietens TensorFlow's start-up
(:mod:`tcnlm_tf.quiet`), for every command of the project.
"""
from tcnlm_tf import quiet
from tcnlm_tf.version import __version__

quiet.install()


def load(path, precision=None):
    """A trained model for Python use: a run directory, a preset directory or an exported
    SavedModel; see :func:`tcnlm_tf.serving.api.load`."""
    from tcnlm_tf.serving.api import load as load_model
    return load_model(path, precision)


__all__ = ["__version__", "load"]
