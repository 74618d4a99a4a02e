"""The house's layering (docs/layout.md): every import points down a layer, no import circles, a
small sim/ root. Every import the code names counts: top-level, lazy (inside a function) and
typing-only (under TYPE_CHECKING) alike, since each is a dependency a reader must follow."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_PACKAGES = ("sim", "calibrate", "kernels")

# layer of each package (a module belongs to the longest prefix listed); a module may import its
# own package and packages of strictly lower layers, never a peer of its layer nor a higher one
LAYERS = {
    "sim": 0,  # the root modules: errors, paths, numbers, yamlio, schema, output (foundation)
    "sim.inputs": 1,
    "kernels": 1,
    "sim.cost": 2,
    "sim.engine": 3,
    "sim.run": 4,
    "sim.sweep": 5,
    "sim.validate": 5,
    "sim.planner": 6,
    "sim.fleet": 6,
    "calibrate": 7,
    "sim.cli": 8,
    "sim.__main__": 9,
}
ALLOWED_CLIMBS: set[tuple[str, str]] = set()  # (importer package, imported package): none today
MAX_ROOT_MODULES = 8
MAX_MODULE_LINES = 300


def _modules() -> dict[str, Path]:
    found = {}
    for package in SOURCE_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of this tree that `name` (a module, or a name inside one) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """Modules of this tree that `module` imports, wherever the import statement stands."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        out |= {target for target in map(_resolve, names) if target and target != module}
    return out


GRAPH = {module: imports_of(module) for module in MODULES}


def layer_of(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return prefix
    raise AssertionError(f"{module}: no layer in LAYERS (add its package to tests/test_layering.py and docs/layout.md)")


def climbs() -> list[str]:
    bad = []
    for module, targets in sorted(GRAPH.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if theirs != mine and LAYERS[theirs] >= LAYERS[mine] and (mine, theirs) not in ALLOWED_CLIMBS:
                bad.append(f"{module} -> {target} ({mine} is layer {LAYERS[mine]}, {theirs} layer {LAYERS[theirs]})")
    return bad


def circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(GRAPH):
        if start in index:
            continue
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_climbs_a_layer():
    assert climbs() == []


def test_no_import_circles():
    assert circles() == []


def test_the_checks_see_a_climb_and_a_circle(monkeypatch):
    """The two checks above can fail: a cost module importing the CLI, and back."""
    monkeypatch.setitem(GRAPH, "sim.cost.model", GRAPH["sim.cost.model"] | {"sim.cli"})
    monkeypatch.setitem(GRAPH, "sim.cli", GRAPH["sim.cli"] | {"sim.cost.model"})
    assert any(line.startswith("sim.cost.model -> sim.cli ") for line in climbs())
    assert any({"sim.cost.model", "sim.cli"} <= set(component) for component in circles())


def test_lazy_and_typing_only_imports_count(tmp_path):
    """An import inside a function or under TYPE_CHECKING is a dependency too."""
    sched_base = imports_of("sim.engine.sched.base")
    assert "sim.engine.metrics" in sched_base
    source = MODULES["sim.engine.scheduler_view"].read_text()
    assert re.search(r"if TYPE_CHECKING:.*\n(\s+.*\n)*\s+from sim\.engine\.sched\.plan import", source)
    assert "sim.engine.sched.plan" in imports_of("sim.engine.scheduler_view")


def test_sim_root_is_small():
    root_modules = sorted(path.name for path in (ROOT / "sim").glob("*.py"))
    assert len(root_modules) <= MAX_ROOT_MODULES, root_modules


@pytest.mark.parametrize("package", [p for p in LAYERS if p not in ("sim", "sim.__main__")])
def test_every_layer_is_in_the_stage_map(package):
    """docs/layout.md names every package of the layer table, so the map and the test agree."""
    assert f"`{package.replace('.', '/')}/`" in (ROOT / "docs" / "layout.md").read_text()


def test_no_module_over_the_line_limit():
    lines = {module: len(path.read_text().splitlines()) for module, path in MODULES.items()}
    long = {module: n for module, n in lines.items() if n > MAX_MODULE_LINES}
    assert long == {}
