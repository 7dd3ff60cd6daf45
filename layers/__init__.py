"""Reusable Keras 3 layers for topic-guided language models.

Every layer here is registered for serialisation under the ``tcnlm_tf`` package name,
has ``get_config``, documents its input/output shapes and the paper equation it
implements, and does no file I/O.
"""
