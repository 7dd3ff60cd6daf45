"""Maintenance tools of the repository, run from its root: ``python -m tools.reference``
writes the command-line reference in docs/reference/ from the commands' own parsers, and
``python -m tools.docs_check`` runs (or parses) the shell commands of README.md and docs/.
They read the project's modules and change none of them."""
