"""Command-line evaluation of trained runs (``--run runs/<name>``)."""
