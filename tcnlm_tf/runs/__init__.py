"""Run directories (``runs/<name>``), what ``python -m train.run`` writes and every evaluator,
the exporter and ``evaluate.compare`` read: where each of a run's files is
(:mod:`~tcnlm_tf.runs.directory`), the lock that keeps one writer per run
(:mod:`~tcnlm_tf.runs.lock`), checkpoints that name every variable of a Keras model
(:mod:`~tcnlm_tf.runs.checkpoints`), the record of the code, command and machine behind a run
(:mod:`~tcnlm_tf.runs.provenance`), and loading a trained run back with its model and
vocabularies (:mod:`~tcnlm_tf.runs.loading`, :func:`~tcnlm_tf.runs.loading.load_run`).
"""
