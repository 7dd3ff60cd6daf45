"""Command-line training: ``python -m train.run`` (train), ``python -m train.prepare`` (raw
text to corpus format)."""
