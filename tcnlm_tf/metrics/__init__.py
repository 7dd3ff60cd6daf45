"""What the project measures: the one perplexity definition every number uses
(:mod:`~tcnlm_tf.metrics.perplexity`), the unigram and oracle reference points printed beside
every model (:mod:`~tcnlm_tf.metrics.baselines`), NPMI topic coherence
(:mod:`~tcnlm_tf.metrics.coherence`), how well learned topics match the synthetic corpus's true
ones (:mod:`~tcnlm_tf.metrics.recovery`), and the computations the ``evaluate`` commands run on
a loaded run: corpus likelihood, document topics and topic-conditioned generation
(:mod:`~tcnlm_tf.metrics.evaluation`).
"""
