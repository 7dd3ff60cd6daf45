"""The package's version, as a preset's metadata records it."""
__version__ = "0.1.0"
