"""No module of the project imports, directly or through others, a module that imports it:
counted with every import, the ones inside functions too, since a cycle broken only by a
late import still ties the two modules together (``tcnlm_tf.decoders.output_layers`` builds
the layers of ``tcnlm_tf.models.lstm``, so the layers it builds live in ``layers/``, which
imports nothing of the project). Modules are counted one by one, a subpackage such as
``tcnlm_tf.data`` by its ``__init__``; the layers the imports follow are described in
``docs/architecture.md``."""
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
