"""tcnlm_tf: topic-guided neural language models (TCNLM, TDLM, SDLM and baselines) in Keras 3.

Project-specific pieces live here: configuration presets, corpus reading and caching,
vocabularies, the synthetic corpus, model assembly and the shared perplexity definition.
Reusable Keras layers live in the top-level ``layers`` package. Importing the package
quietens TensorFlow's start-up (:mod:`tcnlm_tf.quiet`), for every command of the project.
"""
from tcnlm_tf import quiet

quiet.install()

__version__ = "0.1.0"
