"""No import circles inside agentloom, and each part imports only the parts below it.

A circle means neither module can be read, changed or tested without the other; it also makes the
import order matter. The graph is built from the source text, not by importing, so a module with
optional dependencies still counts. Every import that can run is an edge, an import deferred into a
function included: deferring hides a circle from the interpreter, not from the next reader. Imports
under ``if TYPE_CHECKING:`` never run and are not edges of a circle; for the layers they count, since
naming another part's types still ties a module to that part.

:data:`LAYERS` is the table ARCHITECTURE.md states: which top-level part may import which.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "agentloom"


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


def find_modules(src: Path, package: str) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _runtime_imports(body: list[ast.stmt], *, types: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that can run: anywhere but under ``if TYPE_CHECKING:`` (there too with ``types``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test) and not types:
            found.extend(_runtime_imports(node.orelse))
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, []):
                    found.extend(_runtime_imports([child] if isinstance(child, ast.stmt) else child.body, types=types))
    return found


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _owner(name: str, modules: dict[str, Module]) -> str | None:
    """The module of ours that importing ``name`` loads last (its longest known prefix)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: dict[str, Module], *, types: bool = False) -> dict[str, set[str]]:
    """Who imports whom; with ``types``, imports under ``if TYPE_CHECKING:`` are edges too."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
        for node in _runtime_imports(tree.body, types=types):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(module, node)
                # `from pkg import x` loads pkg.x when x is a submodule, else it reads a name of pkg.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            for target in targets:
                owner = _owner(target, modules)
                if owner is not None and owner != module.name:
                    graph[module.name].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            if children:
                child = children.pop(0)
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _path_within(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete circle through the component's first module, to show in the failure."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return component


def test_no_import_circles() -> None:
    modules = find_modules(SRC, PACKAGE)
    graph = import_graph(modules)
    found = cycles(graph)
    described = [f"{' -> '.join(_path_within(graph, c))}  (component: {', '.join(c)})" for c in found]
    assert not found, "import circles in src/agentloom:\n" + "\n".join(described)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_planted_circle_is_found(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from pkg.c import thing\n",
            "pkg/c.py": "from .a import other\n",
            "pkg/d.py": "from . import a\n",
        },
    )
    graph = import_graph(find_modules(tmp_path, "pkg"))
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert _path_within(graph, ["pkg.a", "pkg.b", "pkg.c"]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_type_only_imports_are_not_edges_deferred_ones_are(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n",
            "pkg/b.py": "def f():\n    from . import a\n",
            "pkg/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import d\nelse:\n    x = 1\n",
            "pkg/d.py": "from pkg.c import x\n",
        },
    )
    graph = import_graph(find_modules(tmp_path, "pkg"))
    assert graph["pkg.a"] == set()
    assert graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set()
    assert cycles(graph) == []


# -- layers -------------------------------------------------------------------------------------
# A module's part is its first name under the package (``core``, ``server``, ...), each pack under
# ``packs/`` a part of its own (``packs.vectors``), and the package's own ``__init__`` (the version) is
# ``__init__``. A part may import itself and the parts its entry names: lower layers never import higher
# ones, and packs never import each other (what two packs share lives in ``retrieval``).
PACK_INTERFACE = "server's pack interface"
INTERFACE_MODULES = frozenset({"server.packs", "server.services", "server.work", "server.roots"})
PACK_USES = frozenset({"core", "embeddings", "retrieval", "terminal", PACK_INTERFACE})
LAYERS: dict[str, frozenset[str]] = {
    "__init__": frozenset(),
    "core": frozenset(),
    "embeddings": frozenset({"core"}),
    "retrieval": frozenset({"core", "embeddings"}),  # Chroma access and keyword search, for the packs
    "terminal": frozenset({"core"}),  # what every command line shares, the packs' included
    "stitch": frozenset({"core"}),  # the engine: a service of its own
    "server": frozenset({"__init__", "core", "embeddings"}),
    "packs": frozenset(),  # packs/__init__.py: the folder, found through entry points
    "packs.*": PACK_USES,  # every pack, unless named below
    "packs.stitch": PACK_USES | {"stitch"},  # the engine's MCP face
    "cli": frozenset({"__init__", "core", "embeddings", "terminal", "server"}),  # packs: through entry points
    "__main__": frozenset({"cli"}),
}
# (importing module, imported part): why this one module may.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("packs.docs.mcp", "server"): "agentic-knowledge-mcp is a program of its own, the docs pack alone served "
    "by a Host over stdio: a top layer like cli",
}


def part_of(module: str) -> str:
    """The part of a module named relative to the package (``packs.vectors.store`` -> ``packs.vectors``)."""
    names = module.split(".") if module else []
    if not names:
        return "__init__"
    if names[0] == "packs" and len(names) > 1:
        return f"packs.{names[1]}"
    return names[0]


def _rule(part: str, layers: dict[str, frozenset[str]]) -> frozenset[str] | None:
    if part in layers:
        return layers[part]
    return layers.get("packs.*") if part.startswith("packs.") else None


def forbidden_imports(
    graph: dict[str, set[str]],
    package: str,
    layers: dict[str, frozenset[str]] = LAYERS,
    exceptions: dict[tuple[str, str], str] = EXCEPTIONS,
) -> list[str]:
    """One line per import the table forbids (importer, imported, the rule), and per exception unused."""

    def local(name: str) -> str:
        return name.removeprefix(package).removeprefix(".")

    found: list[str] = []
    used: set[tuple[str, str]] = set()
    for importer in sorted(graph):
        source = part_of(local(importer))
        allowed = _rule(source, layers)
        if allowed is None:
            found.append(f"{importer}: part {source!r} has no entry in LAYERS (say what it may import)")
            continue
        for imported in sorted(graph[importer]):
            target = part_of(local(imported))
            if target == source or target in allowed:
                continue
            if local(imported) in INTERFACE_MODULES and PACK_INTERFACE in allowed:
                continue
            if (local(importer), target) in exceptions:
                used.add((local(importer), target))
                continue
            may = ", ".join(sorted(allowed)) or "nothing of the package"
            found.append(f"{importer} imports {imported}: {source} may import {may}, not {target}")
    found.extend(
        f"exception ({module}, {target}) matches no import: remove it from EXCEPTIONS"
        for module, target in sorted(set(exceptions) - used)
    )
    return found


def test_each_part_imports_only_the_layers_below() -> None:
    graph = import_graph(find_modules(SRC, PACKAGE), types=True)
    found = forbidden_imports(graph, PACKAGE)
    assert not found, "imports the layers forbid (tests/test_imports.py LAYERS):\n" + "\n".join(found)


def test_a_planted_forbidden_import_is_found(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core/__init__.py": "",
            "pkg/core/a.py": "from pkg.server import host\n",
            "pkg/server/__init__.py": "",
            "pkg/server/host.py": "from pkg.core import a\n",
            "pkg/server/packs.py": "",
            "pkg/packs/__init__.py": "",
            "pkg/packs/one/__init__.py": "from pkg.server.packs import x\nfrom pkg.server import host\n",
            "pkg/packs/two/__init__.py": "import typing\nif typing.TYPE_CHECKING:\n    from ..one import y\n",
            "pkg/packs/docs/mcp.py": "def main():\n    from pkg.server.host import Host\n",
            "pkg/extra/__init__.py": "",
        },
    )
    graph = import_graph(find_modules(tmp_path, "pkg"), types=True)
    assert forbidden_imports(graph, "pkg") == [
        "pkg.core.a imports pkg.server.host: core may import nothing of the package, not server",
        "pkg.extra: part 'extra' has no entry in LAYERS (say what it may import)",
        "pkg.packs.one imports pkg.server.host: packs.one may import core, embeddings, retrieval, "
        f"{PACK_INTERFACE}, terminal, not server",
        "pkg.packs.two imports pkg.packs.one: packs.two may import core, embeddings, retrieval, "
        f"{PACK_INTERFACE}, terminal, not packs.one",
    ]
    assert forbidden_imports(graph, "pkg", exceptions={**EXCEPTIONS, ("core.b", "cli"): "gone"})[-1] == (
        "exception (core.b, cli) matches no import: remove it from EXCEPTIONS"
    )
