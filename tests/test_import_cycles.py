"""No module of the project imports, directly or through others, a module that imports it:
counted with every import, the ones inside functions too, since a cycle broken only by a
late import still ties the two modules together (``tcnlm_tf.decoders.output_layers`` builds
the layers of ``tcnlm_tf.models.lstm``, so the layers it builds live in ``layers/``, which
imports nothing of the project). Modules are counted one by one, a subpackage such as
``tcnlm_tf.data`` by its ``__init__``. And the imports run down the layers that
``docs/architecture.md`` describes: between the top-level folders, and through the tiers of
``tcnlm_tf``."""
import ast

from tests.conftest import REPO_ROOT

PACKAGES = ("tcnlm_tf", "layers", "train", "evaluate", "benchmarks")


def modules() -> dict[str, ast.Module]:
    """Every module of the project's packages, by dotted name (a package by its own)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (``from a import b`` imports ``a.b`` where
    ``b`` is a module, else ``a``)."""
    trees = modules()
    graph = {}
    for name, tree in trees.items():
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {m for m in imported if m in trees and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_one_that_imports_it():
    graph = import_graph()
    assert {"tcnlm_tf.decoders.output_layers", "layers.tied_softmax", "train.run"} <= graph.keys()
    assert cycles(graph) == []


#: what each top-level folder may import of the project (docs/architecture.md)
FOLDERS = {"layers": set(), "tcnlm_tf": {"layers"}, "train": {"tcnlm_tf", "layers"},
           "evaluate": {"tcnlm_tf", "layers", "train"},
           "benchmarks": {"tcnlm_tf", "layers", "train", "evaluate"}}
#: the tiers inside tcnlm_tf (docs/architecture.md): a module imports only its own tier or
#: lower ones; "models" stands for every module of tcnlm_tf.models but its registry, "" for
#: the package's own __init__ (it installs the quiet start-up)
TIERS = (
    ("", "errors", "quiet", "version", "precision", "arguments", "options", "data",
     "decoders", "runs", "metrics", "serving", "cli"),
    ("models.registry", "decoders.registry", "data.corpus", "data.vocab", "data.synthetic",
     "data.prepare", "data.embeddings", "data.knowledge", "data.shards", "data.examples",
     "data.sharded_array", "data.shard_checks", "data.permutation", "metrics.perplexity",
     "metrics.coherence", "metrics.recovery", "metrics.topic_words", "runs.lock", "runs.directory",
     "runs.checkpoints", "runs.provenance", "serving.mixtures", "serving.scoring", "serving.warmup",
     "samplers", "tracing"),
    ("config",),
    ("data.loading", "data.pipeline", "metrics.baselines"),
    ("models", "decoders.output_layers"),
    ("runs.loading",),
    ("serving.generation", "serving.module", "serving.preset", "serving.api",
     "metrics.evaluation"),
    ("cli.command_line",),
)


def tier_of(module: str) -> int:
    """The tier of a ``tcnlm_tf`` module, from 1."""
    name = module.removeprefix("tcnlm_tf").removeprefix(".")
    if name.startswith("models") and name != "models.registry":
        name = "models"
    found = [index for index, tier in enumerate(TIERS, 1) if name in tier]
    assert found, f"tcnlm_tf.{name} has no tier: add it to TIERS and docs/architecture.md"
    return found[0]


def test_imports_run_down_between_folders():
    up = sorted(f"{m} imports {i}" for m, imported in import_graph().items()
                for i in imported if (folder := m.split(".")[0]) in FOLDERS
                and i.split(".")[0] not in FOLDERS[folder] | {folder})
    assert not up, up


#: the one import up the tiers: the package's ``tcnlm_tf.load``, the Python API's front
#: door, imports its implementation when it is called (docs/architecture.md)
FRONT_DOOR = ("tcnlm_tf", "tcnlm_tf.serving.api")


def test_imports_run_down_the_tiers_of_tcnlm_tf():
    graph = import_graph()
    assert FRONT_DOOR[1] in graph[FRONT_DOOR[0]]
    up = sorted(f"{m} (tier {tier_of(m)}) imports {i} (tier {tier_of(i)})"
                for m, imported in graph.items() if m.startswith("tcnlm_tf")
                for i in imported if i.startswith("tcnlm_tf") and tier_of(i) > tier_of(m)
                and (m, i) != FRONT_DOOR)
    assert not up, up
