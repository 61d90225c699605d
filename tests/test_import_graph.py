"""The module import graph of clustergym: no cycles, and layers that only call downward.

Edges come from every ``import`` statement of a module's source, at module level or inside a function (a
function-level import hides a dependency, it does not remove it), ``if TYPE_CHECKING:`` blocks included.
Importing ``clustergym.a.b`` is an edge to that module only (its parent packages' ``__init__`` run too, but
counting them would make every submodule depend on its package).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {"clustergym": "envs", "clustergym.agents": "agents", "clustergym.baselines": "baselines",
                "clustergym.eval": "eval", "clustergym.train": "train"}
# Layer of each module, by name prefix (longest first): core -> env -> policies -> eval -> train.
LAYERS = (("clustergym.core", 0), ("clustergym.train", 4), ("clustergym.eval", 3), ("clustergym.agents", 2),
          ("clustergym.baselines", 2), ("clustergym", 1))
# The cycle that the split of the engine (issue 14 item 1) removes; delete this entry when it is gone
# (test_known_cycles_still_exist fails then).


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGE_DIRS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path], node: ast.AST) -> set[str]:
    """The clustergym modules one import statement of module ``name`` refers to."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            here = here[:len(here) - node.level + 1]
            base = ".".join(here + ([node.module] if node.module else []))
        # `from pkg import x` imports the submodule pkg.x if there is one, else a name of pkg
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    return {t for t in targets if t in known and t != name}


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = set().union(*(imported(name, path, known, n) for n in ast.walk(tree)
                                    if isinstance(n, (ast.Import, ast.ImportFrom))))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[v] = min(low[v], index[child])
    return out


def layer(module: str) -> int:
    return next(level for prefix, level in LAYERS if module == prefix or module.startswith(prefix + "."))


def test_the_graph_sees_function_level_and_relative_imports():
    g = import_graph()
    assert "clustergym.eval.files" in g["clustergym.eval.compare"]  # module level
    assert "clustergym.scenarios" in g["clustergym.eval.rollout"]  # inside evaluate()
    assert "clustergym.baselines" in g["clustergym.eval.rollout"]  # `from clustergym import baselines`
    assert "clustergym.eval.files" in g["clustergym.eval.report"]  # `from .files import ...`
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert layer("clustergym.core.engine") < layer("clustergym.gym_env") < layer("clustergym.agents.bc") \
        == layer("clustergym.baselines") < layer("clustergym.eval.rollout") < layer("clustergym.train.ppo")


def test_no_module_imports_one_that_imports_it_back():
    found = cycles(import_graph())
    assert not found, found



def test_layers_only_call_downward():
    """core -> env -> policies (baselines, agents) -> eval -> train: no module imports a higher layer."""
    up = sorted(f"{a} -> {b}" for a, deps in import_graph().items() for b in deps if layer(b) > layer(a))
    assert not up, up
