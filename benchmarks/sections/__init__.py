"""The sections of ``python -m benchmarks.run``, one module each, run in this order:
``recurrent``, ``models``, ``decoders``, ``scaling``, ``peers``. Each module has

* ``add_arguments(parser)``: its group of flags;
* ``check(args)``: raises :class:`~tcnlm_tf.errors.UserError` for a flag value its types
  cannot refuse alone, and fills in defaults that depend on other flags;
* ``run(args)``: times its contenders with :mod:`benchmarks.harness` and prints its tables.

``args`` holds every section's flags and the harness's timing flags: a section may read
another's (the decoders use the recurrent section's ``--hidden-size`` and ``--input-size``,
the scaling section the models section's ``--synthetic``)."""
