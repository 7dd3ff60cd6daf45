"""Speed measurements that print side-by-side ratios: ``python -m benchmarks.run`` (the
sections of ``benchmarks/sections/`` on the timing harness ``benchmarks/harness.py``) and the
single-purpose ``python -m benchmarks.bench_adaptive_softmax``, ``bench_decoders``,
``profile_output_floors``, ``profile_bf16_step`` (where a training step's time goes under
float32 and bfloat16), ``probe_sememe_gates`` and ``probe_lstm_recurrence`` (the LSTM
recurrence against ``torch.nn.LSTM``); ``torch_peers``, the PyTorch side of the ``peers``
section; ``torch_reference_lm``, the SDLM
authors' tied-LSTM recipe in plain PyTorch (a reference curve, not a speed measurement)."""
