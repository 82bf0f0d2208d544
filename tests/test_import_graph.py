"""toolfork's import graph has no circle.

The graph is built from the source with ``ast``, not by importing: every ``import`` statement counts
wherever it stands (module level, inside a function, under ``if TYPE_CHECKING:``), because a circle
hidden in a function or a type-checking block is still a circle a reader has to untangle. Relative
imports are resolved against the importing module's package; ``from pkg import name`` counts as an
import of ``pkg.name`` when that is a module of the package, else as an import of ``pkg``. Only edges
between toolfork's own modules are kept. Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``
too, but those edges are not counted: a package's ``__init__`` re-exporting its modules would make
every package a circle of its own and hide the real ones.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "toolfork"


def find_modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of a package (``pkg/__init__.py`` is ``pkg``)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


@dataclass(frozen=True)
class Imported:
    module: str  # the package's module the statement loads
    names: tuple[str, ...]  # names taken from it (``from M import a, b``), empty for ``import M``
    line: int


def _resolve(modules: dict[str, Path], importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = importer if modules[importer].name == "__init__.py" else importer.rpartition(".")[0]
    base = package.split(".")
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _owning_module(modules: dict[str, Path], dotted: str) -> str | None:
    """The module a dotted import name loads (itself, or its longest prefix that is a module)."""
    while dotted:
        if dotted in modules:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


def imports_of(modules: dict[str, Path], module: str) -> Iterator[Imported]:
    tree = ast.parse(modules[module].read_text(), filename=str(modules[module]))
    for node in ast.walk(tree):  # every statement, wherever it stands
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _owning_module(modules, alias.name)
                if target:
                    yield Imported(target, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(modules, module, node)
            plain: list[str] = []
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:
                    yield Imported(submodule, (), node.lineno)
                else:
                    plain.append(alias.name)
            target = _owning_module(modules, source)
            if plain and target:
                yield Imported(target, tuple(plain), node.lineno)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {m: {i.module for i in imports_of(modules, m) if i.module != m} for m in modules}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module (or with a self edge)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
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
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return sorted(found)


def shortest_cycle_through(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside one component (breadth first)."""
    parent: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & within):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if nxt not in seen:
                seen.add(nxt)
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is in a component but on no cycle")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle, as paths: for each component, the shortest cycle through each of its modules,
    each distinct cycle once (rotations folded)."""
    out: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for start in component:
            path = shortest_cycle_through(graph, start, members)
            ring = path[:-1]
            turn = ring.index(min(ring))
            key = tuple(ring[turn:] + ring[:turn])
            if key not in seen:
                seen.add(key)
                out.append([*key, key[0]])
    return out


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The builder itself, on a package whose imports are known: a relative import, a submodule taken
    with ``from pkg import name``, an import inside a function, one under TYPE_CHECKING, a name taken
    from a module (not a submodule), and modules outside the package (left out)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from pkg.a import A\n",
        "a.py": "import os\nfrom .b import B\nA = 1\n",
        "b.py": "def f():\n    import pkg.sub.c\nB = 2\n",
        "sub/__init__.py": "from . import c\nfrom .. import d\n",
        "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n",
        "d.py": "from pkg.sub import c as see\nimport pkg.a.A\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(find_modules(pkg))
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub": {"pkg.sub.c", "pkg.d"},
        "pkg.sub.c": {"pkg.a"},
        "pkg.d": {"pkg.sub.c", "pkg.a"},
    }
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    toy = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"d"}, "e": {"a"}, "f": {"g"}, "g": {"f", "a"}}
    assert strongly_connected(toy) == [["a", "b", "c"], ["d"], ["f", "g"]]
    assert cycles(toy) == [["a", "b", "c", "a"], ["d", "d"], ["f", "g", "f"]]


def test_no_import_circle_in_toolfork() -> None:
    found = cycles(import_graph(find_modules(PACKAGE_DIR)))
    assert not found, f"{len(found)} import circle(s):\n" + "\n".join(" -> ".join(c) for c in found)


# ----------------------------------------------------------------------------- private names
# A module's private names (``_name``) are its own: another module of the package reaching them, by
# importing one or by reading an attribute that only another module defines, is a seam a reader cannot
# see. Found from the source: a module "defines" a private name it binds itself (a def or class, an
# assignment at module or class level, ``self._x = ...``, a ``__slots__`` entry); an access is
# ``obj._x`` on anything but ``self``/``cls``/``super()``, or ``from toolfork... import _x``.


def private_definitions(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.add(node.value)  # __slots__ entries, setattr names
    return {name for name in found if name.startswith("_") and not name.startswith("__")}


def private_accesses(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, what, name) for every private name the module takes from elsewhere."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolfork"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, f"from {node.module} import", alias.name
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            yield node.lineno, ast.unparse(owner), node.attr


def test_no_module_reaches_into_another_modules_private_names() -> None:
    modules = find_modules(PACKAGE_DIR)
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in modules.items()}
    defined = {name: private_definitions(tree) for name, tree in trees.items()}
    elsewhere: dict[str, set[str]] = {}
    for name, names in defined.items():
        for private in names:
            elsewhere.setdefault(private, set()).add(name)
    found = []
    for name, tree in trees.items():
        for line, what, private in private_accesses(tree):
            owners = elsewhere.get(private, set())
            if what.startswith("from ") or (owners and name not in owners):
                taken = f"{what} {private}" if what.startswith("from ") else f"{what}.{private}"
                found.append(f"{modules[name].relative_to(PACKAGE_DIR.parent)}:{line}: {taken}"
                             f" (defined in {', '.join(sorted(owners)) or 'no toolfork module'})")
    assert not found, f"{len(found)} private name(s) used outside their module:\n" + "\n".join(found)


# ----------------------------------------------------------------------------- layers
# Dependencies point one way (docs/internals.md): a package imports only packages of a lower layer.
# The root package ``toolfork`` (the public re-exports) and ``_extras`` (the optional-dependency helper)
# sit where their imports put them. A backend's internals (``backends/fork/``, ``backends/ray*``) are
# imported only inside ``executor/backends/``: everything else reaches a backend through ``Backend``,
# its ``Capabilities`` and ``backends.choose``.

LAYERS: dict[str, float] = {
    "_extras": 0, "governance": 0,
    "tools": 1,
    "executor": 2, "toolkits": 2,
    "toolfork": 2.5,  # the root package: the main names of tools, governance and the executor
    "agent": 3, "mcp": 3, "adapters": 3,
    "testing": 4, "bench": 4,
    "commands": 5,
    "cli": 6,
    "__main__": 7,
}
BACKENDS = "toolfork.executor.backends"
INTERNALS = (f"{BACKENDS}.fork", f"{BACKENDS}.ray")
# Modules outside backends/ allowed to import a backend's internals, with why (none: sessions are opened
# through Backend.open_session).
INTERNALS_EXCEPT: set[str] = set()
# Arrows up that are allowed, with why (none now).
UP_EXCEPT: set[tuple[str, str]] = set()


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "toolfork"


def arrows_up(modules: dict[str, Path]) -> list[str]:
    found = []
    for module in modules:
        mine = _package(module)
        for imp in imports_of(modules, module):
            theirs = _package(imp.module)
            if theirs == mine or (module, imp.module) in UP_EXCEPT:
                continue
            if mine not in LAYERS or theirs not in LAYERS:
                found.append(f"{module} -> {imp.module}: a package with no layer (add it to LAYERS)")
            elif LAYERS[theirs] >= LAYERS[mine]:
                found.append(f"{module} -> {imp.module} (line {imp.line}): {mine} may not import {theirs}")
    return sorted(set(found))


def backend_internals_reached(modules: dict[str, Path]) -> list[str]:
    found = []
    for module in modules:
        if module.startswith(BACKENDS + ".") or module in INTERNALS_EXCEPT:
            continue
        for imp in imports_of(modules, module):
            if imp.module.startswith(INTERNALS):
                found.append(f"{module} -> {imp.module} (line {imp.line})")
    return sorted(set(found))


def test_no_arrow_runs_back_up() -> None:
    found = arrows_up(find_modules(PACKAGE_DIR))
    assert not found, f"{len(found)} import(s) against the layers:\n" + "\n".join(found)


def test_no_module_outside_backends_imports_a_backends_internals() -> None:
    found = backend_internals_reached(find_modules(PACKAGE_DIR))
    assert not found, f"{len(found)} import(s) of a backend's internals from outside backends/:\n" + "\n".join(found)


def test_the_layer_checks_see_a_planted_arrow(tmp_path: Path) -> None:
    """The two checks on a package with an arrow up (governance -> tools, lazily) and a reach into the
    fork backend (commands, under TYPE_CHECKING): each is named."""
    pkg = tmp_path / "toolfork"
    for folder in ("governance", "tools", "commands", "executor/backends/fork"):
        (pkg / folder).mkdir(parents=True, exist_ok=True)
    files = {
        "__init__.py": "", "tools/__init__.py": "", "commands/__init__.py": "", "governance/__init__.py": "",
        "executor/__init__.py": "", "executor/backends/__init__.py": "", "executor/backends/fork/__init__.py": "",
        "tools/tool.py": "from toolfork.governance import limits\n",
        "governance/limits.py": "def f():\n    from toolfork.tools import tool\n",
        "executor/backends/fork/pool.py": "from toolfork.executor.backends import base\n",
        "executor/backends/base.py": "",
        "commands/run.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from toolfork.executor.backends.fork.pool import X\n"),
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    modules = find_modules(pkg)
    assert arrows_up(modules) == ["toolfork.governance.limits -> toolfork.tools.tool (line 2): "
                                  "governance may not import tools"]
    assert backend_internals_reached(modules) == [
        "toolfork.commands.run -> toolfork.executor.backends.fork.pool (line 3)"]
