"""The output layers a language model ends in, chosen with ``--decoder``: the registry of
decoder choices with their options, dropouts and configuration rules, pure Python so that
command-line parsing stays fast (:mod:`~tcnlm_tf.decoders.registry`), and the classes that
turn a choice into its Keras layer and prepare a run for it, such as the knowledge base of
the sememe-driven decoder (:mod:`~tcnlm_tf.decoders.output_layers`).
"""
