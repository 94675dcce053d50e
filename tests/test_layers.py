"""kerasrl's modules import one way: each layer only from the layers below it, no two folders
from each other, no cycle, and imports inside functions only for optional extras and for the
command-line launchers (which set TensorFlow's log level before TensorFlow loads).

Every import is read with ``ast``, those inside functions included.
"""
from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "kerasrl"

#: Bottom to top; a unit is a folder of ``kerasrl/`` or a module at its root.
LAYERS: list[set[str]] = [
    {"_buffer", "_kernels", "compat", "exception", "spec", "fields", "settings", "buffer", "timers", "arrays", "configs",
     "xla_cache", "distribute", "samplers", "curriculum", "optimizers", "demos"},
    {"envs", "models"},
    {"common"},
    {"rewards"},
    {"bc", "ppo", "sac"},
    {"trainers"},
    {"cli", "api", "callbacks", "export", "plot", "recording"},
]
#: Modules that may import inside functions, and why.
LAUNCHERS = {
    "kerasrl.cli.main": "sets TensorFlow's log level before the training stack loads",
    "kerasrl.cli.tools": "sets TensorFlow's log level before the export stack loads",
}
#: Optional extras, imported where they are used so that kerasrl works without them.
OPTIONAL_EXTRAS = {"ray", "tf2onnx", "onnxruntime", "matplotlib"}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _target(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The modules (or packages) an import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parent = module.split(".")[: len(module.split(".")) - node.level + int(is_package)]
        base = ".".join(parent + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports() -> list[tuple[str, str, int, bool]]:
    """(importer, imported, line, inside a function) for every import in the package."""
    found = []
    for module, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _target(module, path.name == "__init__.py", node):
                    found.append((module, name, node.lineno, id(node) not in top))
    return found


IMPORTS = _imports()


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(unit: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit in layer:
            return i
    raise AssertionError(f"kerasrl/{unit} is in no layer of tests/test_layers.py: add it to LAYERS")


def _internal() -> list[tuple[str, str, int, bool]]:
    return [(a, b, line, inner) for a, b, line, inner in IMPORTS if b.startswith("kerasrl.") and a != "kerasrl"]


def test_every_unit_has_a_layer():
    for module in MODULES:
        if module != "kerasrl":
            _layer(_unit(module))


def test_no_module_imports_a_layer_above_it():
    upward = [f"{a} (line {line}) imports {b}, which is in a higher layer"
              for a, b, line, _ in _internal() if _layer(_unit(b)) > _layer(_unit(a))]
    assert not upward, "\n".join(upward)


def test_no_two_units_import_each_other():
    edges = defaultdict(set)
    for a, b, _, _ in _internal():
        if _unit(a) != _unit(b):
            edges[_unit(a)].add(_unit(b))
    pairs = sorted({tuple(sorted((u, v))) for u in edges for v in edges[u] if u in edges.get(v, ())})
    assert not pairs, f"units importing each other: {pairs}"


def test_no_import_cycle():
    graph = defaultdict(set)
    for a, b, _, _ in _internal():
        while b not in MODULES and "." in b:
            b = b.rsplit(".", 1)[0]
        if a != b and not a.startswith(b + "."):  # a package's own __init__ is no cycle
            graph[a].add(b)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_imports_inside_functions_are_for_extras_and_launchers_only():
    inner = [f"{a} (line {line}) imports {b} inside a function"
             for a, b, line, inside in IMPORTS
             if inside and a not in LAUNCHERS and b.split(".")[0] not in OPTIONAL_EXTRAS]
    assert not inner, "\n".join(inner)


def test_nothing_imports_the_command_line():
    users = [f"{a} (line {line})" for a, b, line, _ in _internal() if _unit(b) == "cli" and _unit(a) != "cli"]
    assert not users, f"the cli package is imported by {users}"


def test_the_checker_sees_an_upward_import():
    """The rules are not vacuous: an upward import, as the checker reads it, is caught."""
    tree = ast.parse("def f():\n    from kerasrl.trainers import TrainerController\n")
    node = tree.body[0].body[0]
    (name,) = _target("kerasrl.rewards.base", False, node)
    assert _layer(_unit(name)) > _layer(_unit("kerasrl.rewards.base"))
