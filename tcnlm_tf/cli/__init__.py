"""The ``python -m train.run`` command line: its parser, built from the model and decoder
registries, and the run configuration its flags, a configuration file or a resumed run make
(:mod:`~tcnlm_tf.cli.command_line`). The evaluators that take training flags,
``evaluate.compare`` and the benchmarks build their configurations through it too.
"""
