"""tools.docs_check: how it reads the Markdown (modes, continuations, line numbers), that a
long block's commands are parsed by their own parsers (a bad flag fails, naming the line),
that run blocks run in a sandbox, and that blocks needing ../shared are skipped without it.
Nothing here trains."""
from __future__ import annotations

from pathlib import Path

from tools.docs_check import (Block, check_file, check_long, commands, extract_blocks,
                              summary)

REPO_ROOT = Path(__file__).resolve().parent.parent

SAMPLE = """# Title

```bash
python -m train.run --epochs 1 \\
    --max-steps 2   # a comment
# a comment line

ls
```

Some text.

```bash long
python -m train.run --dataset apnews --data-dir ../shared/data \\
  --model tcnlm --epochs 20
```

```text
python -m train.run --not-checked
```

- a list item:

   ```bash
   echo indented
   ```
"""


def test_extract_modes_lines_and_continuations():
    blocks = extract_blocks(SAMPLE, "x.md")
    assert [(b.line, b.mode) for b in blocks] == [(3, "run"), (13, "long"), (18, "ignored"),
                                                  (24, "run")]
    first = commands(blocks[0])
    assert [(c.line, c.text) for c in first] == [
        (4, "python -m train.run --epochs 1 --max-steps 2   # a comment"), (8, "ls")]
    assert [(c.line, c.text) for c in commands(blocks[1])] == [
        (14, "python -m train.run --dataset apnews --data-dir ../shared/data --model tcnlm "
             "--epochs 20")]
    assert blocks[1].needs_shared() and not blocks[0].needs_shared()
    assert blocks[3].text == "echo indented"


def long_block(text: str) -> Block:
    return Block("doc.md", 10, "long", "bash long", text)


def test_long_block_parses_good_flags():
    outcomes = check_long(long_block(
        "RUN=runs/apnews-tcnlm\n"
        "python -m train.run --dataset apnews --data-dir ../shared/data \\\n"
        "    --model tcnlm --num-topics 50 --epochs 3 2>&1 | tee train.log\n"
        "nohup python -m evaluate.perplexity --run $RUN --batch-size 8 > out.txt &\n"
        "tensorboard --logdir runs\n"))
    assert [(o.kind, o.line) for o in outcomes] == [("parsed", 12), ("parsed", 14),
                                                     ("unchecked", 15)]


def test_long_block_fails_on_a_bad_flag_naming_the_line():
    outcomes = check_long(long_block("python -m train.run --epochs 2\n"
                                     "python -m train.run --no-such-flag 1\n"
                                     "python -m train.run --epochs many\n"
                                     "python -m evaluate.no_such_command --x\n"))
    failed = [(o.line, o.message) for o in outcomes if o.kind == "failed"]
    assert [line for line, _ in failed] == [12, 13, 14]
    assert "--no-such-flag" in failed[0][1] and "--epochs" in failed[1][1]
    assert "evaluate.no_such_command" in failed[2][1]
    assert summary(outcomes) == "docs-check: ran 0, parsed 1, skipped 0, failed 3"


def test_run_blocks_run_in_a_sandbox_and_stop_the_file_at_a_failure(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\nmkdir -p runs/x && echo ok > runs/x/out\ntest -f README.md\n```\n"
                   "\n```bash\ntest -f runs/x/out\nfalse\n```\n\n```bash\necho never\n```\n")
    lines = []
    outcomes = check_file(doc, shared=tmp_path / "absent", timeout=60, report=lines.append)
    assert [(o.kind, o.line) for o in outcomes] == [("ran", 1), ("failed", 6), ("skipped", 11)]
    assert "exit 1" in outcomes[1].message
    assert not (REPO_ROOT / "runs" / "x" / "out").exists()
    assert any(line.startswith("FAILED") and ":6 run" in line for line in lines)


def test_blocks_that_need_shared_are_skipped_without_it(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\nls ../shared/data\n```\n\n"
                   "```bash long\npython -m train.run --data-dir ../shared/data\n```\n")
    outcomes = check_file(doc, shared=tmp_path / "absent", report=lambda line: None)
    assert [(o.kind, o.line) for o in outcomes] == [("skipped", 1), ("parsed", 6)]
    assert "../shared" in outcomes[0].message


def test_long_block_parses_a_package_run_by_its_main():
    """``python -m tests.faults`` runs the package's ``__main__``: its flags are parsed there
    (a bad one fails), not refused for the package having no ``main``."""
    outcomes = check_long(long_block("python -m tests.faults --quick --kinds disk-full\n"
                                     "python -m tests.faults --no-such-flag\n"))
    assert [o.kind for o in outcomes] == ["parsed", "failed"]
    assert "--no-such-flag" in outcomes[1].message
