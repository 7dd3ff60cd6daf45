"""The files of a run directory (``runs/<name>``), named in one place.

``python -m train.run`` writes a run directory; every evaluator, the exporter and
``evaluate.compare`` read it. :class:`RunDirectory` says where each of its files is, so no
other module spells a file name of a run (a model's or decoder's own files, such as an SDLM
run's ``knowledge_base.npz`` or an LDA+LSTM run's ``lda/``, are named by the code that writes
them), and :class:`RunDirectoryWatch` tells the process that writes a run whether its directory
is still the one it locked. Pure Python.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from tcnlm_tf.errors import UserError
from tcnlm_tf.runs.lock import LOCK_FILE, RunLock, file_identity

#: the name of a training checkpoint's carried-state file (:meth:`RunDirectory.resume_state`);
#: its group is the checkpoint's step
RESUME_STATE = re.compile(r"resume-state-(\d+)\.npz")


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """The files of the run directory ``path``:

    ``config``        config.json, the run's :class:`~tcnlm_tf.config.RunConfig`
    ``lm_vocab``      lm_vocab.txt, the LM vocabulary (one word per line, id = line)
    ``topic_vocab``   topic_vocab.txt, the topic-model vocabulary
    ``vocab_digests`` vocab_digests.json, the SHA-256 of each vocabulary file as the run
                      wrote it (:func:`tcnlm_tf.runs.loading.load_vocabularies`; runs of
                      earlier versions have none)
    ``checkpoints``   checkpoints/, the newest training checkpoints, with each one's
                      carried-state file (:meth:`resume_state`)
    ``best``          best/, the weights of the best validation perplexity
    ``tensorboard``   tensorboard/, the event files
    ``metrics``       metrics.json, the history of every epoch and how the run ended
    ``lock``          .lock, held by the one process that writes the run
                      (:mod:`tcnlm_tf.runs.lock`)

    and what the evaluators write there: ``topics`` (topics.txt, ``evaluate.topics``),
    ``coherence`` (coherence.json, ``evaluate.coherence``), ``recovery`` (recovery.json,
    ``evaluate.recovery``), ``ablations`` (ablations.json, ``evaluate.compare``) and
    :meth:`topic_plot` (``evaluate.infer``).
    """

    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config(self) -> Path:
        return self.path / "config.json"

    @property
    def lm_vocab(self) -> Path:
        return self.path / "lm_vocab.txt"

    @property
    def topic_vocab(self) -> Path:
        return self.path / "topic_vocab.txt"

    @property
    def vocab_digests(self) -> Path:
        return self.path / "vocab_digests.json"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def best(self) -> Path:
        return self.path / "best"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.json"

    @property
    def lock(self) -> Path:
        return self.path / LOCK_FILE

    @property
    def topics(self) -> Path:
        return self.path / "topics.txt"

    @property
    def coherence(self) -> Path:
        return self.path / "coherence.json"

    @property
    def recovery(self) -> Path:
        return self.path / "recovery.json"

    @property
    def ablations(self) -> Path:
        return self.path / "ablations.json"

    def topic_plot(self, document: int) -> Path:
        """The bar chart of the topics of ``document`` (its index in the file read)."""
        return self.path / f"topics_doc{document}.png"

    def resume_state(self, step: int) -> Path:
        """The carried state and data-order position of the training checkpoint of
        ``step``."""
        return self.checkpoints / f"resume-state-{step}.npz"

    def resume_states(self) -> list[Path]:
        """Every carried-state file in ``checkpoints/``."""
        return sorted(self.checkpoints.glob("resume-state-*.npz"))

    def model_files(self) -> list[Path]:
        """What the model and its decoder keep in the run directory for themselves (such as
        ``lda/`` or ``knowledge_base.npz``): every entry that is none of the files above,
        sorted."""
        own = {self.config, self.lm_vocab, self.topic_vocab, self.vocab_digests,
               self.checkpoints, self.best, self.tensorboard, self.metrics, self.lock,
               self.topics, self.coherence, self.recovery, self.ablations}
        return sorted(p for p in self.path.iterdir()
                      if p not in own and not p.match("topics_doc*.png"))

    def has_checkpoint(self) -> bool:
        """Whether a training checkpoint has been written (a run to resume): the state file
        ``checkpoints/checkpoint``, or, where that is gone, a checkpoint's index
        (``ckpt-<n>.index``), which resuming finds by its number."""
        return (self.checkpoints / "checkpoint").is_file() or any(
            re.search(r"-\d+$", path.stem) for path in self.checkpoints.glob("*.index"))


class RunDirectoryGone(UserError):
    """The run directory a training writes was deleted, moved or replaced under it: one line
    naming the directory and what shows it. The training stops there, rather than write
    checkpoints, ``best/`` and ``metrics.json`` into a directory without the run's
    ``config.json`` and vocabularies (which the evaluators and the exporter need) or into
    another run's."""

    def __init__(self, path: Path, what: str, sign: str):
        super().__init__(f"run directory {path} was {what} while training ({sign}); nothing "
                         "more is written: start the run again")


class RunDirectoryWatch:
    """Whether the run directory locked by ``lock`` (this process's
    :class:`~tcnlm_tf.runs.lock.RunLock`, which ``train.run`` takes before it writes
    anything) is still the one it locked: the one whose lock file the lock is on
    (:meth:`RunLock.intact`). The lock keeps that file open, so no new file can take its
    inode while it is held. Paths are followed through symlinks, so a run directory
    reached through a linked ``--runs-dir`` is watched as well. A check takes a few
    ``stat`` calls: cheap enough before every write."""

    def __init__(self, lock: RunLock):
        self.lock = lock
        self.files = RunDirectory(lock.directory)

    def problem(self) -> tuple[str, str] | None:
        """None while the directory is the one locked; else what happened to it
        (``"deleted or moved"`` or ``"replaced"``) and what shows it."""
        if self.lock.intact():
            return None
        if file_identity(self.files.path) is None:
            return "deleted or moved", "the directory is gone"
        if file_identity(self.lock.path) is not None:
            return "replaced", f"its {self.lock.name} is another process's"
        if not self.files.config.is_file():
            return "deleted or moved", f"{self.files.config.name} is gone"
        return "deleted or moved", f"its {self.lock.name} is gone"

    def made_again(self) -> bool:
        """Whether a directory other than the one locked is at its path: made after the
        one locked was deleted (the lock holds that one open, so a new one cannot take
        its identity)."""
        return file_identity(self.files.path) not in (None, self.lock.directory_identity)

    def check(self) -> None:
        """:class:`RunDirectoryGone` unless the directory is the one locked."""
        found = self.problem()
        if found is not None:
            raise RunDirectoryGone(self.files.path, *found)


#: Python's name of a parsed JSON value's type -> JSON's, for saying what a file holds
JSON_TYPES = {"list": "array", "str": "string", "int": "number", "float": "number",
              "bool": "boolean", "NoneType": "null"}


def read_json_object(path: Path, advice: str) -> dict:
    """The JSON object in ``path`` (a run's ``metrics.json``, a record's file); a
    :class:`UserError` that names the file, what is wrong with it and ``advice`` (what to
    do) where it cannot be read, is not UTF-8 JSON (truncated, random bytes, bit rot) or
    holds another JSON value than an object, which every reader indexes by key."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UserError(f"cannot read {path} ({err.strerror}): {advice}") from None
    except UnicodeDecodeError as err:
        raise UserError(f"cannot read {path} as JSON (not UTF-8 text: {err.reason} at byte "
                        f"{err.start}): {advice}") from None
    except json.JSONDecodeError as err:
        raise UserError(f"cannot read {path} as JSON ({err.msg} at line {err.lineno}, "
                        f"column {err.colno}): {advice}") from None
    if not isinstance(found, dict):
        kind = JSON_TYPES.get(type(found).__name__, type(found).__name__)
        raise UserError(f"{path} holds no JSON object (but a JSON {kind}): {advice}")
    return found
