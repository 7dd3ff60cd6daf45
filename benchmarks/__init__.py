"""Speed measurements that print side-by-side ratios: ``python -m benchmarks.run`` (the
sections of ``benchmarks/sections/`` on the timing harness ``benchmarks/harness.py``) and the
single-purpose ``python -m benchmarks.bench_adaptive_softmax``, ``bench_decoders``,
``profile_output_floors`` and ``probe_sememe_gates``."""
