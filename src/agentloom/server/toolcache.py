"""Tool definitions kept across starts, so that ``tools/list`` does not wait for pydantic.

Registering a tool makes the SDK build a pydantic model of its arguments and the JSON schemas of
its input and output: about 1.5 ms a tool, 60 ms for the 40 built-in ones, a third of what
``agentloom serve`` adds to a bare MCPServer's start (BENCHMARKS.md, "Cold start"). The
definitions a client sees (name, title, description, schemas, annotations) depend only on the
code, so they are saved once and read back on later starts; a tool is then built (its argument
model made) on its first call.

The file is ``<cache_dir>/tools/<fingerprint>.json``. The fingerprint covers every ``.py`` file
of agentloom (path, size, mtime) and the SDK and pydantic files that make schemas, so any change
of code means a new file; tools of packs from other distributions are never cached (their code
is not in the fingerprint). Each entry is also keyed by what the registration was given (name,
title, description, annotations, function) and by the version of the rules that compact what is
listed (``schemas.FORMAT``), so a definition is reused only for the same registration made the
same way. An unreadable or unwritable cache costs only the time it would have saved.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp_types import Tool as ToolDefinition

from agentloom.server import schemas

log = logging.getLogger(__name__)

_PACKAGE = Path(__file__).resolve().parents[1]  # the agentloom package


def _code_fingerprint() -> str:
    import pydantic.json_schema
    from mcp.server.mcpserver.utilities import func_metadata

    digest = hashlib.sha256(sys.version.encode())
    files = [Path(func_metadata.__file__), Path(pydantic.json_schema.__file__)]
    for folder, _dirs, names in os.walk(_PACKAGE):
        files += [Path(folder, n) for n in names if n.endswith(".py")]
    for path in sorted(files):
        st = path.stat()
        digest.update(f"{path}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def cacheable(fn: Any) -> bool:
    return str(getattr(fn, "__module__", "")).startswith("agentloom.")


def registration_key(fn: Any, options: dict[str, Any]) -> str:
    """What a definition depends on besides the code: the registration's own arguments, and the
    rules that turn them into what is listed (``schemas.FORMAT``: descriptions, schemas, hints)."""
    plain = {k: (v.model_dump(mode="json") if hasattr(v, "model_dump") else v) for k, v in options.items()}
    blob = json.dumps([schemas.FORMAT, fn.__module__, fn.__qualname__, fn.__doc__, plain], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class ToolCache:
    def __init__(self, cache_dir: Path) -> None:
        self._folder = Path(cache_dir) / "tools"
        self._path: Path | None = None
        self._saved: dict[str, dict[str, Any]] = {}
        self._fresh: dict[str, dict[str, Any]] = {}
        try:
            self._path = self._folder / f"{_code_fingerprint()}.json"
            if self._path.is_file():
                self._saved = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.debug("tool definitions cache not read (%s): tools are registered at start", exc)

    def get(self, key: str) -> ToolDefinition | None:
        raw = self._saved.get(key)
        if raw is None:
            return None
        try:
            return ToolDefinition.model_validate(raw)
        except ValueError:
            return None

    def put(self, key: str, definition: ToolDefinition) -> None:
        self._fresh[key] = definition.model_dump(mode="json", by_alias=True, exclude_none=True)

    def save(self) -> None:
        """Write the definitions seen this start, if any were new; older files are removed."""
        if not self._fresh or self._path is None:
            return
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tools.", suffix=".tmp", dir=self._folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump({**self._saved, **self._fresh}, out)
                os.replace(tmp, self._path)
            finally:
                Path(tmp).unlink(missing_ok=True)
            for old in self._folder.glob("*.json"):
                if old != self._path:
                    old.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("tool definitions cache not written (%s)", exc)
        self._saved.update(self._fresh)
        self._fresh.clear()
