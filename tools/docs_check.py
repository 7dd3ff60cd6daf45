"""``python -m tools.docs_check``: the shell commands of README.md and docs/**/*.md (not the
generated docs/reference), run or parsed, so that the documentation's commands keep working.

Fenced blocks, by their info string:

* ```` ```bash ````: run. The blocks of one Markdown file run in order, each with
  ``bash -euo pipefail``, in one sandbox per file (below); after a failing block the file's
  later blocks are skipped, since they may build on it. A failure prints the file, the
  block's line and the tail of its output.
* ```` ```bash long ````: not run (trainings of hours). Each ``python -m <module> ...``
  command of the project (``\\`` continuations joined, ``&&``/``|``/``;`` lists split,
  redirections, leading ``VAR=value`` and ``nohup``/``time``/``timeout N``/``env`` dropped,
  ``$VAR`` of assignments earlier in the block expanded) is parsed by that module's own
  argument parser (:func:`tools.commands.capture_parser`): an unknown flag, a bad value or
  a module that no longer exists fails, naming the file and line. Other commands
  (``docker``, ``tensorboard``, ``pip``, ``make``, ``python -m pytest``) are listed as not
  checked.
* any other language (``text``, ``console``, ``python``, ...): ignored.

A ``bash`` block that mentions ``../shared`` (the corpora beside the checkout) is skipped,
with a note, when that directory does not exist (``$TCNLM_SHARED_DIR`` overrides where it
is looked for, as for the tests); a long block is parsed either way (parsing reads no
files).

The sandbox of a file: a temporary directory holding ``checkout/``, a copy of the
repository's files (``git ls-files``: tracked and untracked-but-not-ignored; no runs/,
.cache/, data/ or exports) made a git repository of one commit, with ``.venv`` a link to
the checkout's virtual environment, and ``shared``, a link to ``../shared`` where it
exists. Blocks run in ``checkout/``, so ``../shared/data`` resolves as it does from the
repository root, relative defaults (``runs/``, ``.cache/``, ``data/``, ``saved_models/``)
and every file a command writes into the checkout (a ``results/`` record, RESULTS.md, a
git commit) land in the copy; ``TCNLM_RUNS_DIR``, ``TCNLM_CACHE_DIR`` and ``TCNLM_DATA_DIR``
are unset, ``HOME`` and ``TMPDIR`` point into the sandbox, ``PYTHONPATH`` is the copy, and
the virtual environment's ``bin`` is first on ``PATH``, so ``python`` is the project's
interpreter. The sandbox is removed afterwards (``--keep`` keeps it and prints where).

The last line sums up: ``ran N`` blocks, ``parsed M`` commands, ``skipped K`` blocks,
``failed F`` (blocks and commands); the exit status is 1 when F > 0."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.commands import PROJECT_PACKAGES, REPO_ROOT, CaptureError, capture_parser

#: the folder of the corpora beside the checkout that the docs' commands name ``../shared``
SHARED_DIR = Path(os.environ.get("TCNLM_SHARED_DIR", REPO_ROOT.parent / "shared"))
#: Markdown that is generated, not written: never checked
GENERATED = (Path("docs") / "reference",)
#: environment variables that would send a command's output or input outside the sandbox
UNSET = ("TCNLM_RUNS_DIR", "TCNLM_CACHE_DIR", "TCNLM_DATA_DIR", "VIRTUAL_ENV",
         "PYTHONHOME", "PYTHONSTARTUP")
#: the lines of a failing block's output shown
TAIL_LINES = 25
#: wrappers that run the command after them (``timeout`` and ``nice -n`` take a value)
WRAPPERS = {"nohup": 0, "time": 0, "exec": 0, "env": 0, "command": 0, "timeout": 1,
            "nice": 0}
#: a fence line: indentation, the fence, the info string
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*?)\s*$")
#: a shell redirection (``> file``, ``2>&1``, ``>> log``, ``< in``) as one piece of text
REDIRECTION = re.compile(r"(?<!\S)\d*(?:>>|&>|>&|>\||>|<)\s*(?:'[^']*'|\"[^\"]*\"|[^\s;&|]+)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclasses.dataclass
class Block:
    """A fenced block: where it is, its mode (``run``, ``long`` or ``ignored``), its text."""

    path: str
    line: int                  # the opening fence's line, from 1
    mode: str
    info: str
    text: str

    @property
    def first_line(self) -> int:
        return self.line + 1

    def needs_shared(self) -> bool:
        return "../shared" in self.text


@dataclasses.dataclass
class Command:
    """One logical line of a block (continuations joined), with its first line's number."""

    line: int
    text: str


@dataclasses.dataclass
class Outcome:
    """What became of a block or a command."""

    kind: str                  # ran, parsed, skipped, failed, unchecked
    path: str
    line: int
    message: str = ""


# ---------------------------------------------------------------------------- extraction

def block_mode(info: str) -> str:
    words = info.split()
    if not words or words[0] != "bash":
        return "ignored"
    return "long" if "long" in words[1:] else "run"


def extract_blocks(text: str, path: str = "<text>") -> list[Block]:
    """The fenced blocks of the Markdown ``text``, in order (an unclosed fence runs to the
    end, as CommonMark reads it)."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match or (match.group("fence")[0] == "`" and "`" in match.group("info")):
            i += 1
            continue
        fence, indent, info = match.group("fence"), len(match.group("indent")), match["info"]
        body = []
        j = i + 1
        while j < len(lines):
            closing = FENCE.match(lines[j])
            if (closing and not closing.group("info")
                    and closing.group("fence")[0] == fence[0]
                    and len(closing.group("fence")) >= len(fence)):
                break
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip())):])
            j += 1
        blocks.append(Block(path, i + 1, block_mode(info), info, "\n".join(body)))
        i = j + 1
    return blocks


def commands(block: Block) -> list[Command]:
    """The logical lines of ``block``: ``\\``-continued lines joined, blank lines and
    comment lines left out."""
    out = []
    pending: list[str] = []
    start = 0
    for offset, line in enumerate(block.text.splitlines()):
        if not pending:
            start = block.first_line + offset
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        out.append(Command(start, " ".join(part.strip() for part in pending).strip()))
        pending = []
    if pending:
        out.append(Command(start, " ".join(part.strip() for part in pending).strip()))
    return out


# ---------------------------------------------------------------------------- parse-only

def strip_comment(text: str) -> str:
    """``text`` up to a shell comment: a ``#`` that starts a word outside quotes."""
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def split_simple(text: str) -> list[list[str]]:
    """The simple commands of a shell line: comment and redirections dropped, split at
    ``&&``, ``||``, ``;``, ``|``, ``&`` and parentheses; each a list of words."""
    lexer = shlex.shlex(REDIRECTION.sub(" ", strip_comment(text)), posix=True,
                        punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    simple: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set("();<>|&"):
            simple.append([])
        else:
            simple[-1].append(token)
    return [words for words in simple if words]


def expand(word: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)",
                  lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), word)


def python_module(words: list[str]) -> tuple[str | None, list[str]] | None:
    """``(module, args)`` of ``python [-u ...] -m module args``; ``(None, [])`` for another
    use of python (a script, ``-c``); None when ``words`` does not start with python."""
    while words and (ASSIGNMENT.match(words[0]) or words[0] in WRAPPERS):
        if words[0] in WRAPPERS:
            skip = WRAPPERS[words[0]]
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[2:] if words[0] == "-n" else words[1:]
            words = words[skip:]
        else:
            words = words[1:]
    if not words or not re.fullmatch(r"(?:.*/)?python3?(?:\.\d+)?|\$\{?PY\}?", words[0]):
        return None
    rest = words[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest = rest[2:] if rest[0] in ("-X", "-W") else rest[1:]
    if len(rest) >= 2 and rest[0] == "-m":
        return rest[1], rest[2:]
    if rest and rest[0].startswith("-m") and len(rest[0]) > 2:
        return rest[0][2:], rest[1:]
    return None, []


class _ParseFailure(Exception):
    pass


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _all_parsers(sub)
    return found


_PARSERS: dict[str, argparse.ArgumentParser | CaptureError] = {}


def parser_of(module: str) -> argparse.ArgumentParser:
    """The captured parser of ``module`` (cached); a :class:`CaptureError` if none."""
    if module not in _PARSERS:
        try:
            _PARSERS[module] = capture_parser(module)
        except CaptureError as err:
            _PARSERS[module] = err
    found = _PARSERS[module]
    if isinstance(found, CaptureError):
        raise found
    return found


def parse_with(module: str, args: list[str]) -> str | None:
    """None when ``python -m module args`` parses, else why not."""
    try:
        parser = parser_of(module)
    except CaptureError as err:
        return str(err)

    def error(message: str):
        raise _ParseFailure(message)

    parsers = _all_parsers(parser)
    for each in parsers:
        each.error = error
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            parser.parse_args(args)
    except _ParseFailure as err:
        return f"python -m {module}: {err}"
    except SystemExit as err:       # --help, --version
        return None if not err.code else f"python -m {module}: exit {err.code}"
    except Exception as err:        # a type that raises its own error (a UserError)
        return f"python -m {module}: {err}"
    finally:
        for each in parsers:
            del each.error
    return None


def check_long(block: Block) -> list[Outcome]:
    """Every command of a long block parsed (module docstring)."""
    outcomes = []
    variables: dict[str, str] = {}
    for command in commands(block):
        try:
            simple = split_simple(command.text)
        except ValueError as err:   # unbalanced quotes
            outcomes.append(Outcome("failed", block.path, command.line,
                                    f"cannot split {command.text!r}: {err}"))
            continue
        checked, others = [], []
        for words in simple:
            words = [expand(word, variables) for word in words]
            names = words[1:] if words[0] == "export" else words
            if names and all(ASSIGNMENT.match(word) for word in names):
                variables.update(word.split("=", 1) for word in names)
                continue
            found = python_module(words)
            module = found[0] if found else None
            if module is None or module.split(".")[0] not in PROJECT_PACKAGES:
                others.append(" ".join(words))
                continue
            problem = parse_with(module, found[1])
            checked.append(Outcome("failed" if problem else "parsed", block.path,
                                   command.line, problem or f"python -m {module}"))
        # a line with a project command is checked; the rest of it (``| tee log``) is not
        # worth a line of its own
        if checked:
            outcomes += checked
        elif others:
            outcomes.append(Outcome("unchecked", block.path, command.line, "; ".join(others)))
    return outcomes


# ---------------------------------------------------------------------------- running

def project_files(root: Path = REPO_ROOT) -> list[str]:
    """The repository's files: tracked and untracked-but-not-ignored, that exist."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, text=True, check=True)
    return sorted({name for name in listed.stdout.split("\0")
                   if name and (root / name).is_file()})


def sandbox_environment(base: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in UNSET}
    venv_bin = REPO_ROOT / ".venv" / "bin"
    checkout = base / "checkout"
    home = base / "home"
    env.update({
        "PATH": os.pathsep.join([str(checkout / ".venv" / "bin"), str(venv_bin),
                                 env.get("PATH", "")]),
        "PYTHONPATH": str(checkout), "HOME": str(home), "TMPDIR": str(base / "tmp"),
        "MPLCONFIGDIR": str(home / ".matplotlib"), "PWD": str(checkout),
        "GIT_AUTHOR_NAME": "docs-check", "GIT_AUTHOR_EMAIL": "docs-check@localhost",
        "GIT_COMMITTER_NAME": "docs-check", "GIT_COMMITTER_EMAIL": "docs-check@localhost",
        "GIT_CONFIG_NOSYSTEM": "1", "PYTHONUNBUFFERED": "1",
    })
    if (REPO_ROOT / ".venv").is_dir():
        env["VIRTUAL_ENV"] = str(checkout / ".venv")
    return env


def make_sandbox(base: Path, shared: Path) -> Path:
    """``base/checkout``: the copy of the repository (module docstring)."""
    checkout = base / "checkout"
    for name in project_files():
        target = checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    for folder in ("home", "tmp"):
        (base / folder).mkdir()
    env = sandbox_environment(base)
    git = ["git", "-C", str(checkout)]
    subprocess.run(git + ["init", "-q"], env=env, check=True)
    (checkout / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (checkout / ".git" / "info" / "exclude").write_text("/.venv\n")
    subprocess.run(git + ["add", "-A"], env=env, check=True)
    subprocess.run(git + ["commit", "-q", "--no-verify", "-m", "docs-check sandbox"], env=env,
                   check=True, capture_output=True)
    if (REPO_ROOT / ".venv").is_dir():
        (checkout / ".venv").symlink_to(REPO_ROOT / ".venv")
    if shared.is_dir():
        (base / "shared").symlink_to(shared.resolve())
    return checkout


def run_block(block: Block, base: Path, timeout: float | None) -> Outcome:
    """``block`` run in the sandbox ``base`` (made by :func:`make_sandbox`)."""
    script = base / "blocks" / f"line-{block.line}.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(block.text + "\n", encoding="utf-8")
    start = time.monotonic()
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", str(script)], cwd=base / "checkout",
                              env=sandbox_environment(base), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        output, code = done.stdout.decode("utf-8", "replace"), done.returncode
    except subprocess.TimeoutExpired as err:
        output = (err.stdout or b"").decode("utf-8", "replace")
        code = f"timed out after {timeout:g} s"
    seconds = time.monotonic() - start
    if code == 0:
        return Outcome("ran", block.path, block.line, f"{seconds:.1f} s")
    tail = "\n".join("    " + line for line in output.rstrip().splitlines()[-TAIL_LINES:])
    return Outcome("failed", block.path, block.line,
                   f"block failed ({code if isinstance(code, str) else f'exit {code}'}, "
                   f"{seconds:.1f} s); the end of its output:\n{tail}")


# ---------------------------------------------------------------------------- files

def default_files(root: Path = REPO_ROOT) -> list[Path]:
    """README.md and docs/**/*.md, without the generated pages."""
    docs = sorted(path for path in (root / "docs").rglob("*.md")
                  if not any(path.relative_to(root).is_relative_to(g) for g in GENERATED))
    return [path for path in [root / "README.md", *docs] if path.is_file()]


def shown(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


def check_file(path: Path, shared: Path = SHARED_DIR, timeout: float | None = None,
               keep: bool = False, report=print) -> list[Outcome]:
    """Every block of the Markdown file ``path`` checked (module docstring); each outcome
    reported as it comes."""
    name = shown(path)
    blocks = extract_blocks(path.read_text(encoding="utf-8"), name)
    outcomes: list[Outcome] = []
    base: Path | None = None
    broken = None
    try:
        for block in blocks:
            if block.mode == "long":
                found = check_long(block)
                for outcome in found:
                    if outcome.kind == "failed":
                        report(f"FAILED {outcome.path}:{outcome.line}: {outcome.message}")
                parsed = sum(o.kind == "parsed" for o in found)
                report(f"{name}:{block.line} long: {parsed} command(s) parsed")
                outcomes += found
            elif block.mode == "run":
                if block.needs_shared() and not shared.is_dir():
                    outcome = Outcome("skipped", name, block.line,
                                      f"it uses ../shared and {shared} does not exist")
                elif broken is not None:
                    outcome = Outcome("skipped", name, block.line,
                                      f"the block at line {broken} of this file failed")
                else:
                    if base is None:
                        base = Path(tempfile.mkdtemp(prefix="docs-check-"))
                        make_sandbox(base, shared)
                    report(f"{name}:{block.line} run ...")
                    outcome = run_block(block, base, timeout)
                    if outcome.kind == "failed":
                        broken = block.line
                prefix = "FAILED " if outcome.kind == "failed" else ""
                report(f"{prefix}{name}:{block.line} run: {outcome.kind}: {outcome.message}")
                outcomes.append(outcome)
    finally:
        if base is not None:
            if keep:
                report(f"{name}: sandbox kept in {base}")
            else:
                shutil.rmtree(base, ignore_errors=True)
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    count = {kind: sum(o.kind == kind for o in outcomes)
             for kind in ("ran", "parsed", "skipped", "failed")}
    return (f"docs-check: ran {count['ran']}, parsed {count['parsed']}, skipped "
            f"{count['skipped']}, failed {count['failed']}")


def list_blocks(files: list[Path], shared: Path) -> None:
    for path in files:
        for block in extract_blocks(path.read_text(encoding="utf-8"), shown(path)):
            mode = block.mode if block.mode != "ignored" else f"ignored ({block.info or 'plain'})"
            if block.mode == "run" and block.needs_shared() and not shared.is_dir():
                mode = "skip (../shared missing)"
            first = next((c.text for c in commands(block)), "")
            print(f"{block.path}:{block.line}\t{mode}\t{first[:100]}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.docs_check", allow_abbrev=False,
        description="run the ```bash blocks of README.md and docs/**/*.md in a sandbox and "
                    "parse the commands of their ```bash long blocks with the commands' own "
                    "parsers (python -m tools.docs_check's module docstring says how)")
    parser.add_argument("--list", action="store_true",
                        help="print every fenced block with its mode and check nothing")
    parser.add_argument("--file", type=Path, action="append", metavar="PATH",
                        help="check only this Markdown file (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="the longest one run block may take (default: %(default)g)")
    parser.add_argument("--keep", action="store_true",
                        help="keep each file's sandbox and print where it is")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    files = [path if path.is_absolute() or path.exists() else REPO_ROOT / path
             for path in args.file] if args.file else default_files()
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        print(f"no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.list:
        list_blocks(files, SHARED_DIR)
        return 0
    outcomes = []
    for path in files:
        outcomes += check_file(path, SHARED_DIR, args.timeout, args.keep)
    unchecked = [o for o in outcomes if o.kind == "unchecked"]
    if unchecked:
        print("not checked (not a python -m command of this project):")
        for outcome in unchecked:
            print(f"  {outcome.path}:{outcome.line}: {outcome.message[:120]}")
    skipped = [o for o in outcomes if o.kind == "skipped"]
    for outcome in skipped:
        print(f"skipped {outcome.path}:{outcome.line}: {outcome.message}")
    failed = [o for o in outcomes if o.kind == "failed"]
    if failed:
        print("failed:")
        for outcome in failed:
            print(f"  {outcome.path}:{outcome.line}: {outcome.message.splitlines()[0]}")
    print(summary(outcomes))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
