"""Corpora and what is made from them: reading and writing the corpus format
(:mod:`~tcnlm_tf.data.corpus`), turning raw text into it (:mod:`~tcnlm_tf.data.prepare`), the
language-model and topic-model vocabularies (:mod:`~tcnlm_tf.data.vocab`, with the project's
stop-word list in ``resources/``), the synthetic corpus with its known topics
(:mod:`~tcnlm_tf.data.synthetic`), loading a corpus into cached integer arrays
(:mod:`~tcnlm_tf.data.loading`, :func:`~tcnlm_tf.data.loading.load_corpus`), the per-example
context fields and ``tf.data`` pipelines the models train on (:mod:`~tcnlm_tf.data.pipeline`),
pre-trained word vectors (:mod:`~tcnlm_tf.data.embeddings`) and the word-sense-sememe
knowledge bases of the sememe-driven decoder (:mod:`~tcnlm_tf.data.knowledge`).
"""
