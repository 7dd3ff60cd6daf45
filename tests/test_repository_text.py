"""No machine paths, no development-log vocabulary and no issue-tracker references in the
repository's text: every Markdown file (``git ls-files '*.md'``, as it is in the working
tree, with new files git does not ignore) and every docstring and comment of its Python
files (docstrings found with :mod:`ast`, comments with :mod:`tokenize`, so string literals
of code are not read; a help text reaches the test through the generated docs/reference).

What is flagged, each a whole-word, case-insensitive match (:data:`RULES`):

* machine paths: the checkout's own absolute path and its parent folder's (computed at test
  time, so a checkout anywhere is covered), home folders (``/root/``, ``/home/<user>/``,
  ``/Users/<user>/``, ``~/runs``-style paths), and ``/work/``;
* the vocabulary of a development log's working periods (``this session``, ``sitting``,
  ``working period``, ``frozen copy``, ``paused``, ``before this change``, ``until now``,
  ``at <commit hash>``, ...): the repository describes what the code does and what the
  records show, not when or in which stretch of work they came about;
* references to this project's issue tracker (``issue 12``, ``issues 23/24``, ``(#14)``):
  they mean nothing to a reader without it. A qualified reference to another project
  (``pytest-dev/pytest-xdist#1386``) is a citation and is not flagged.

Result-folder names such as ``results/apnews/papers-protocol`` are not this test's business.

:data:`ALLOWED` lists the genuine uses (file, pattern, reason); a hit in a file with no entry
for it fails the test, which lists every hit as ``file:line: rule: text`` with a count per
file. No file is exempt as a whole: a genuine use is one ALLOWED entry with its reason."""
from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections import Counter
from pathlib import Path
from typing import Iterator, NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent


def _path_rules() -> list[tuple[str, re.Pattern]]:
    """The machine-path rules: fixed home-folder shapes, and this checkout's own folders."""
    rules = [
        ("home folder /root", re.compile(r"(?<![\w.-])/root/")),
        ("home folder /home/<user>", re.compile(r"(?<![\w.-])/home/[\w.-]+/")),
        ("home folder /Users/<user>", re.compile(r"(?<![\w.-])/Users/[\w.-]+")),
        ("machine folder /work", re.compile(r"(?<![\w.-])/work/")),
        ("home-relative path", re.compile(r"(?<![\w/.-])~/[\w.-][^\s)\]`'\"]*")),
    ]
    for folder in (REPO_ROOT, REPO_ROOT.parent):
        if len(folder.parts) > 1:
            rules.append((f"the checkout's folder {folder}",
                          re.compile(r"(?<![\w.-])" + re.escape(str(folder)) + r"(?![\w.-])")))
    return rules


def _words(*phrases: str) -> re.Pattern:
    """Whole-word, case-insensitive match of any of ``phrases`` (spaces match any
    whitespace, so a phrase broken over two lines of a docstring still matches)."""
    alternatives = "|".join(r"\s+".join(map(re.escape, phrase.split())) for phrase in phrases)
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)


#: (rule, pattern): what the repository's text must not hold
RULES: list[tuple[str, re.Pattern]] = _path_rules() + [
    ("working-period word", _words(
        "sitting", "sittings", "this session", "that session", "last session",
        "previous session", "next session", "earlier session", "later session",
        "working session", "work session", "working period", "working periods",
        "frozen copy", "frozen copies", "paused", "before this change", "after this change",
        "until now", "up to now", "till now", "as of now", "at the time of writing",
        "yesterday", "today", "tomorrow", "this morning", "tonight", "last week",
        "development log", "dev log", "devlog", "work log", "diary", "logbook")),
    ("date as a point in time", re.compile(
        r"(?<![\w-])(?:before|after|since|until|on|as of)\s+\d{4}-\d{2}-\d{2}(?![\w-])",
        re.IGNORECASE)),
    ("commit as a point in time", re.compile(
        r"(?<![\w-])(?:at|since|before|after|until|as of|from)\s+(?:commit\s+)?"
        r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])", re.IGNORECASE)),
    ("issue reference", re.compile(
        r"(?<![\w-])issues?\s+#?\d+(?:\s*(?:/|,|and|&|-)\s*#?\d+)*(?![\w-])", re.IGNORECASE)),
    # saved_model_cli numbers a concrete function's inputs "Option #1", "Argument #2"
    ("issue reference", re.compile(r"(?<![\w/.#-])(?<!Option )(?<!Argument )#\d+(?![\w-])")),
]


class Allowed(NamedTuple):
    """A genuine use: in ``path`` (a file, or a folder ending in ``/``), a hit whose line
    matches ``pattern`` is fine, for ``reason``."""

    path: str
    pattern: str
    reason: str


ALLOWED: list[Allowed] = [
    Allowed("tests/test_repository_text.py", r".",
            "this test's own docstrings name the words and paths it looks for"),
    Allowed("tools/reference.py", r"\(one in the home folder ``~/\.\.\.``\)",
            "says how the reference writes a default in the home folder, as ~/..."),
]


class Hit(NamedTuple):
    """A match: ``text`` is the whole line (what ALLOWED patterns are matched against),
    ``shown`` the part around the match."""

    path: str
    line: int
    rule: str
    text: str
    shown: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.shown}"


def tracked(pattern: str) -> list[str]:
    """The repository's files matching ``pattern`` as they are in the working tree: tracked
    ones, and new ones not yet added that git does not ignore (so a page is checked before
    it is committed)."""
    out = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached",
                          "--others", "--exclude-standard", "--", pattern],
                         capture_output=True, text=True, check=True).stdout
    return sorted(name for name in out.split("\0") if name and (REPO_ROOT / name).is_file())


def python_text(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring line and every comment of Python ``source``; a
    docstring is any string expression statement (module, class, function or attribute
    docstring), read from its source lines so the line numbers are exact."""
    lines = source.splitlines()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                yield number, lines[number - 1]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def text_lines(path: str) -> Iterator[tuple[int, str]]:
    source = (REPO_ROOT / path).read_text(encoding="utf-8")
    if path.endswith(".py"):
        yield from python_text(source)
    else:
        yield from enumerate(source.splitlines(), start=1)


def is_allowed_by(entry: Allowed, hit: Hit) -> bool:
    in_path = hit.path == entry.path or (entry.path.endswith("/")
                                         and hit.path.startswith(entry.path))
    return in_path and re.search(entry.pattern, hit.text) is not None


def is_allowed(hit: Hit) -> bool:
    return any(is_allowed_by(entry, hit) for entry in ALLOWED)


def snippet(line: str, match: re.Match, context: int = 60) -> str:
    """The text around ``match`` in ``line``, the match marked with ``>>`` ``<<``."""
    start, end = match.span()
    before = line[max(0, start - context):start].lstrip()
    after = line[end:end + context].rstrip()
    return (("..." if start > context else "") + before + ">>" + match.group(0) + "<<"
            + after + ("..." if end + context < len(line) else ""))


def hits_in(path: str) -> list[Hit]:
    found = []
    numbered = sorted(set(text_lines(path)))
    for number, line in numbered:
        for rule, pattern in RULES:
            match = pattern.search(line)
            if match:
                found.append(Hit(path, number, rule, line, snippet(line, match)))
    # phrases broken over two lines (a docstring or paragraph wrapped mid-phrase)
    for (number, line), (next_number, following) in zip(numbered, numbered[1:]):
        if next_number != number + 1:
            continue
        joined = line.rstrip() + " " + following.strip()
        for rule, pattern in RULES:
            match = pattern.search(joined)
            if match and match.start() < len(line.rstrip()) < match.end():
                found.append(Hit(path, number, rule, joined, snippet(joined, match)))
    return found


def repository_hits() -> list[Hit]:
    files = tracked("*.md") + tracked("*.py")
    return [hit for path in files for hit in hits_in(path) if not is_allowed(hit)]


def report(hits: list[Hit]) -> str:
    counts = Counter(hit.path for hit in hits)
    lines = [f"{len(hits)} hit(s) of machine paths, development-log words or issue "
             "references, per file, then each (rewrite them; a genuine use goes in ALLOWED with "
             "its reason):"]
    lines += [f"  {count:4d}  {path}" for path, count in sorted(counts.items())]
    lines += [str(hit) for hit in hits]
    return "\n".join(lines)


def test_rules_match_what_they_should():
    def flagged(text: str) -> set[str]:
        return {rule for rule, pattern in RULES if pattern.search(text)}

    assert flagged("as discussed in issue 12") == {"issue reference"}
    assert flagged("see issues 23/24 and (#14)") == {"issue reference"}
    assert flagged("Option #1\n  Argument #2") == set()
    assert flagged("the fix (issue 14)") == {"issue reference"}
    assert flagged("pytest-dev/pytest-xdist#1386 explains it") == set()
    assert flagged('color="#4472c4"') == set()
    assert flagged("measured at 4fa1d30 on the idle machine") == {"commit as a point in time"}
    assert flagged("at 1000000 steps") == set()
    assert flagged("until now the runs were paused") == {"working-period word"}
    assert flagged("the session-wide exports fixture") == set()
    assert flagged("this session trained it") == {"working-period word"}
    assert flagged("runs under ~/runs/i29") == {"home-relative path"}
    assert flagged("/home/alice/data and /root/x") == {"home folder /home/<user>",
                                                       "home folder /root"}
    assert flagged("/usr/share/wordnet") == set()
    assert flagged(f"{REPO_ROOT.parent}/shared/data") >= {
        f"the checkout's folder {REPO_ROOT.parent}"}
    assert flagged("as this project's records before 2026-11-27 did") == {
        "date as a point in time"}
    assert flagged("Wang et al. 2018, Table 2") == set()


def test_python_text_reads_docstrings_and_comments_only():
    source = ('"""Module doc: this session."""\n'
              'x = "until now"  # a comment: paused\n'
              'def f():\n'
              '    """issue 12"""\n'
              '    return "/root/"\n')
    assert [(n, t) for n, t in python_text(source)] == [
        (1, '"""Module doc: this session."""'), (4, '    """issue 12"""'),
        (2, "# a comment: paused")]


def test_no_machine_paths_history_words_or_issue_references():
    hits = repository_hits()
    assert not hits, report(hits)


def test_every_allowed_use_is_still_there():
    """An ALLOWED entry that no longer matches anything is removed, so that the list stays
    the list of genuine uses."""
    files = tracked("*.md") + tracked("*.py")
    hits = [hit for path in files for hit in hits_in(path)]
    unused = [entry for entry in ALLOWED
              if not any(is_allowed_by(entry, hit) for hit in hits)]
    assert not unused, f"ALLOWED entries that match nothing (remove them): {unused}"
