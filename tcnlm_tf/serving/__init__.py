"""Using a trained model to produce text: the SavedModel module that ``python -m train.export``
writes for TF Serving, with string inputs and outputs (:mod:`~tcnlm_tf.serving.module`), the
one sentence generator it shares with ``evaluate.generate`` (:mod:`~tcnlm_tf.serving.generation`),
and the topic vectors that condition generation, pure Python so the serving client can use
them too (:mod:`~tcnlm_tf.serving.mixtures`).
"""
