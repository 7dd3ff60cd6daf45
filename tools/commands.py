"""The project's ``python -m`` commands and their argument parsers, obtained without running
them and without any hook in their modules.

:func:`capture_parser` imports a command's module and calls its ``main([])`` while
``argparse.ArgumentParser.parse_args`` (and ``parse_known_args``) raise a private exception
that carries the parser they were called on, so the command stops at its first parse, before
any work, with every argument added, whether its parser is built inside ``main`` or by a
``build_parser()``. A command that parses in stages (a parser without ``-h`` that takes its
own flags with ``parse_known_args`` and hands the rest to the full parser, as
``evaluate.gradients``) is let through those earlier parses, and its parser is the full one
with the earlier ones' arguments added (:func:`merged`).

:func:`reference_commands` lists the commands that docs/reference documents: every module of
``train`` and ``evaluate`` with a ``main`` and an ``if __name__ == "__main__"`` block, and
``benchmarks.run``."""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import os
import sys
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parent.parent
#: the repository's top-level packages: a ``python -m`` module in one of them is a project
#: command
PROJECT_PACKAGES = ("tcnlm_tf", "layers", "train", "evaluate", "benchmarks", "tools", "tests")
#: the packages all of whose command modules docs/reference documents
REFERENCE_PACKAGES = ("train", "evaluate")
#: the other commands docs/reference documents
REFERENCE_EXTRA = ("benchmarks.run",)
#: environment variables whose values commands show as their defaults (the data, cache and
#: runs directories): unset while parsers are built (:func:`neutral_environment`), so that
#: what they show is the same on every machine
ENVIRONMENT_PREFIX = "TCNLM_"


class CaptureError(RuntimeError):
    """A command's parser could not be obtained."""


class _Captured(BaseException):
    """Raised by the patched parse methods: carries the parser (a BaseException, so that no
    ``except Exception`` in a command's ``main`` catches it)."""

    def __init__(self, parser: argparse.ArgumentParser,
                 earlier: list[argparse.ArgumentParser]) -> None:
        super().__init__(parser.prog)
        self.parser = parser
        self.earlier = earlier


def is_command_module(path: Path) -> bool:
    """Whether the Python file ``path`` defines a top-level ``main`` and runs as a script
    (an ``if __name__ == "__main__"`` block)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    has_main = any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and node.name == "main" for node in tree.body)
    runs = any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
               for node in tree.body)
    return has_main and runs


def reference_commands(root: Path = REPO_ROOT) -> list[str]:
    """The module names of the commands that docs/reference documents, sorted."""
    names = [f"{package}.{path.stem}" for package in REFERENCE_PACKAGES
             for path in sorted((root / package).glob("*.py"))
             if path.stem != "__init__" and is_command_module(path)]
    return sorted(names + [name for name in REFERENCE_EXTRA
                           if (root / (name.replace(".", "/") + ".py")).is_file()])


@contextlib.contextmanager
def neutral_environment() -> Iterator[None]:
    """The ``TCNLM_*`` variables unset and ``COLUMNS`` fixed, restored afterwards."""
    saved = {name: value for name, value in os.environ.items()
             if name.startswith(ENVIRONMENT_PREFIX) or name == "COLUMNS"}
    for name in saved:
        del os.environ[name]
    os.environ["COLUMNS"] = "100"
    try:
        yield
    finally:
        del os.environ["COLUMNS"]
        os.environ.update(saved)


def merged(parser: argparse.ArgumentParser,
           earlier: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """``parser`` with the arguments of the ``earlier`` parsers a staged command parsed first
    (same-titled groups joined), as one parser that takes everything the command takes."""
    if not earlier:
        return parser
    joined = type(parser)(prog=parser.prog, usage=parser.usage, description=parser.description,
                          epilog=parser.epilog, formatter_class=parser.formatter_class,
                          prefix_chars=parser.prefix_chars, add_help=False,
                          allow_abbrev=parser.allow_abbrev, parents=[parser, *earlier])
    return joined


def capture_parser(module_name: str) -> argparse.ArgumentParser:
    """The argument parser of ``python -m module_name`` (its ``__main__`` for a package); a
    :class:`CaptureError` when the module cannot be imported, has no ``main``, or its
    ``main([])`` ends without parsing."""
    try:
        module = importlib.import_module(module_name)
        if hasattr(module, "__path__"):          # a package: python -m runs its __main__
            module = importlib.import_module(f"{module_name}.__main__")
    except ImportError as err:
        raise CaptureError(f"cannot import {module_name}: {err}") from None
    main = getattr(module, "main", None)
    if not callable(main):
        raise CaptureError(f"{module_name} has no main()")
    earlier: list[argparse.ArgumentParser] = []
    real_parse_known_args = argparse.ArgumentParser.parse_known_args

    def parse_args(self, args=None, namespace=None):
        raise _Captured(self, earlier)

    def parse_known_args(self, args=None, namespace=None):
        if not self.add_help:       # a first stage: its own flags, the rest handed on
            earlier.append(self)
            return real_parse_known_args(self, args, namespace)
        raise _Captured(self, earlier)

    saved = (argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args,
             sys.argv)
    argparse.ArgumentParser.parse_args = parse_args
    argparse.ArgumentParser.parse_known_args = parse_known_args
    sys.argv = [module_name]
    quiet = io.StringIO()
    try:
        with neutral_environment(), contextlib.redirect_stdout(quiet), \
                contextlib.redirect_stderr(quiet):
            main([])
    except _Captured as captured:
        return merged(captured.parser, captured.earlier)
    except SystemExit as err:
        raise CaptureError(f"{module_name}.main([]) exited ({err.code}) before parsing its "
                           f"arguments: {quiet.getvalue().strip()[-300:]}") from None
    finally:
        (argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args,
         sys.argv) = saved
    raise CaptureError(f"{module_name}.main([]) returned without parsing arguments")


def subparsers(parser: argparse.ArgumentParser
               ) -> list[tuple[argparse._SubParsersAction, dict[str, argparse.ArgumentParser]]]:
    """The subcommand actions of ``parser``, each with its subcommands' parsers by name
    (aliases left out)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            named = {}
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    named[name] = sub
            found.append((action, named))
    return found
