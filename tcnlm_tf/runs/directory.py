"""The files of a run directory (``runs/<name>``), named in one place.

``python -m train.run`` writes a run directory; every evaluator, the exporter and
``evaluate.compare`` read it. :class:`RunDirectory` says where each of its files is, so no
other module spells a file name of a run (a model's or decoder's own files, such as an SDLM
run's ``knowledge_base.npz`` or an LDA+LSTM run's ``lda/``, are named by the code that writes
them). Pure Python.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from tcnlm_tf.runs.lock import LOCK_FILE


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """The files of the run directory ``path``:

    ``config``        config.json, the run's :class:`~tcnlm_tf.config.RunConfig`
    ``lm_vocab``      lm_vocab.txt, the LM vocabulary (one word per line, id = line)
    ``topic_vocab``   topic_vocab.txt, the topic-model vocabulary
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
        own = {self.config, self.lm_vocab, self.topic_vocab, self.checkpoints, self.best,
               self.tensorboard, self.metrics, self.lock, self.topics, self.coherence,
               self.recovery, self.ablations}
        return sorted(p for p in self.path.iterdir()
                      if p not in own and not p.match("topics_doc*.png"))

    def has_checkpoint(self) -> bool:
        """Whether a training checkpoint has been written (a run to resume): the state file
        ``checkpoints/checkpoint``, or, where that is gone, a checkpoint's index
        (``ckpt-<n>.index``), which resuming finds by its number."""
        return (self.checkpoints / "checkpoint").is_file() or any(
            re.search(r"-\d+$", path.stem) for path in self.checkpoints.glob("*.index"))
