"""The MCP SDK's private parts are used in one module only, ``agentloom.server.sdk_compat``.

An SDK release may rename or drop anything whose name starts with ``_`` without notice; kept
in one module, each such use is found, read and fixed in one place when the SDK is upgraded.
The scan below finds, everywhere else in ``src/agentloom``:

- imports from a private module of ``mcp`` / ``mcp_types`` (``mcp.shared._context_streams``)
  or of a private name (``from mcp.server.stdio import _claim_fd``);
- attribute reads of a private name the SDK defines (``server._tool_manager``,
  ``session._connection``, ``getattr(session, "_connection")``), on any object but ``self``;
- on ``self``, in a class derived from an SDK class, the SDK's private names the class does
  not assign itself (``self._subscriptions`` in a subclass of ``MCPServer``).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import mcp
import mcp_types

import agentloom

SDK_PACKAGES = ("mcp", "mcp_types")
SOURCE = Path(agentloom.__file__).resolve().parent
COMPAT = SOURCE / "server" / "sdk_compat.py"


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@functools.cache
def sdk_private_names() -> frozenset[str]:
    """Every private name the SDK defines: attributes it assigns, methods, module-level names."""
    names: set[str] = set()
    for package in (mcp, mcp_types):
        for path in Path(package.__file__).resolve().parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
    return frozenset(n for n in names if _is_private(n))


def _sdk_module(module: str) -> bool:
    return module.split(".")[0] in SDK_PACKAGES


class _Scan(ast.NodeVisitor):
    def __init__(self, path: Path, tree: ast.Module) -> None:
        self.path = path
        self.findings: list[Finding] = []
        self.sdk_names = self._sdk_imported_names(tree)
        self.sdk_classes: list[set[str] | None] = []  # per enclosing class: what it assigns on self, None if not SDK

    @staticmethod
    def _sdk_imported_names(tree: ast.Module) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and _sdk_module(node.module) and node.level == 0:
                names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update((a.asname or a.name).split(".")[0] for a in node.names if _sdk_module(a.name))
        return names

    def _flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(self.path, getattr(node, "lineno", 0), what))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.level == 0 and _sdk_module(node.module):
            if any(_is_private(part) for part in node.module.split(".")):
                self._flag(node, f"import from the SDK's private module {node.module}")
            for alias in node.names:
                if _is_private(alias.name):
                    self._flag(node, f"import of the SDK's private {node.module}.{alias.name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _sdk_module(alias.name) and any(_is_private(part) for part in alias.name.split(".")):
                self._flag(node, f"import of the SDK's private module {alias.name}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        derived = any(self._names_sdk(base) for base in node.bases)
        own = {
            target.attr
            for child in ast.walk(node)
            if isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store)
            for target in [child]
            if isinstance(child.value, ast.Name) and child.value.id == "self"
        }
        self.sdk_classes.append(own if derived else None)
        self.generic_visit(node)
        self.sdk_classes.pop()

    def _names_sdk(self, node: ast.expr) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.sdk_names

    def _private_read(self, node: ast.AST, receiver: ast.expr, name: str) -> None:
        if not _is_private(name) or name not in sdk_private_names():
            return
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            own = self.sdk_classes[-1] if self.sdk_classes else None
            if own is None or name in own:
                return  # the class's own attribute
            self._flag(node, f"{receiver.id}.{name}: a private attribute of the SDK class it derives from")
            return
        self._flag(node, f".{name}: a private attribute of the SDK")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._private_read(node, node.value, node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            self._private_read(node, node.args[0], node.args[1].value)
        self.generic_visit(node)


def scan(path: Path) -> list[Finding]:
    found = _Scan(path, tree := ast.parse(path.read_text(encoding="utf-8")))
    found.visit(tree)
    return found.findings


def sdk_private_uses(root: Path, allowed: Path) -> list[Finding]:
    return [f for path in sorted(root.rglob("*.py")) if path != allowed for f in scan(path)]


def test_sdk_privates_are_used_in_the_compat_module_only() -> None:
    findings = sdk_private_uses(SOURCE, COMPAT)
    assert not findings, "SDK private parts used outside server/sdk_compat.py (move them there):\n" + "\n".join(
        map(str, findings)
    )


def test_the_compat_module_itself_is_scanned_and_found() -> None:
    """The scan sees what the compat module does: proof it would see the same anywhere else."""
    assert scan(COMPAT), "sdk_compat.py uses no SDK private: the scan is broken or the module is no longer needed"


PLANTED = """\
from mcp.server.mcpserver import MCPServer
from mcp.shared._context_streams import create_context_streams
from mcp.server.stdio import stdio_server, _claim_fd
import mcp.server._otel


class Mine(MCPServer):
    def __init__(self) -> None:
        super().__init__()
        self._tools = {}

    def peek(self) -> object:
        return self._tool_manager, self._tools


def connection(ctx: object) -> object:
    return getattr(ctx.session, "_connection", None)


def bus(server: MCPServer) -> object:
    return server._subscriptions, server.name


class Plain:
    def __init__(self) -> None:
        self._connection = None

    def mine(self) -> object:
        return self._connection
"""


def test_the_scan_names_the_file_and_line_of_each_planted_use(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED, encoding="utf-8")
    findings = sdk_private_uses(tmp_path, tmp_path / "sdk_compat.py")
    assert [(f.path, f.line) for f in findings] == [
        (planted, 2),
        (planted, 3),
        (planted, 4),
        (planted, 13),
        (planted, 17),
        (planted, 21),
    ]
    assert "_tool_manager" in str(findings[3]) and "_connection" in str(findings[4])
    assert str(findings[0]).startswith(f"{planted}:2: ")
    (tmp_path / "sdk_compat.py").write_text(PLANTED, encoding="utf-8")
    assert [f.path for f in sdk_private_uses(tmp_path, tmp_path / "sdk_compat.py")] == [planted] * 6
