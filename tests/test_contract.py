"""The model contract is declared where the generic code finds it: every attribute that the
trainer, the evaluators, generation and serving use on a model is declared by
:class:`~tcnlm_tf.models.base.LanguageModel` (or, for the topic commands,
:class:`~tcnlm_tf.models.base.TopicModel`), not only by a subclass that happens to
implement it."""
import re
from pathlib import Path

from tcnlm_tf.models.base import LanguageModel, TopicModel

ROOT = Path(__file__).resolve().parent.parent
#: the modules that work with any model (evaluate.sememes and the benchmarks are about one
#: decoder or model and may use what only it has)
GENERIC = ["tcnlm_tf/serving/module.py", "tcnlm_tf/serving/generation.py",
           "tcnlm_tf/metrics/evaluation.py", "tcnlm_tf/runs/loading.py",
           "tcnlm_tf/data/pipeline.py", "tcnlm_tf/metrics/coherence.py",
           "train/trainer.py", "evaluate/perplexity.py", "evaluate/topics.py",
           "evaluate/coherence.py", "evaluate/infer.py", "evaluate/generate.py",
           "evaluate/recovery.py", "evaluate/gradients.py"]
#: ``model.<attribute>``, not the configuration's ``config.model.<field>`` (or ``m.model``)
USE = re.compile(r"(?<!config\.)(?<![\w.]m\.)\bmodel\.([a-z_]\w*)")


def used_attributes() -> dict[str, set[str]]:
    uses: dict[str, set[str]] = {}
    for path in GENERIC:
        for name in USE.findall((ROOT / path).read_text(encoding="utf-8")):
            uses.setdefault(name, set()).add(path)
    return uses


def test_every_attribute_the_generic_code_uses_is_declared_by_the_base_classes():
    uses = used_attributes()
    assert {"encode", "log_probs", "target_log_prob", "zero_state", "loss_terms"} <= set(uses)
    declared = {*dir(LanguageModel), *LanguageModel.__annotations__, *dir(TopicModel),
                *TopicModel.__annotations__}
    undeclared = {name: sorted(paths) for name, paths in uses.items() if name not in declared}
    assert undeclared == {}
