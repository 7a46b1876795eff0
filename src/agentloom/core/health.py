"""Health checks shared by ``agentloom doctor`` and the ``health`` tool."""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# Imported lazily by the server, so check that they can be found at all.
CORE_MODULES = ("mcp", "pydantic", "pydantic_settings", "httpx", "numpy", "onnxruntime", "tokenizers", "yaml")


def modules_importable(modules: tuple[str, ...] = CORE_MODULES) -> list[Check]:
    checks = []
    for module in modules:
        found = importlib.util.find_spec(module) is not None
        detail = "found" if found else f"not installed: pip install 'agentloom' brings {module}"
        checks.append(Check(f"import {module}", found, detail))
    return checks


def directory_writable(path: Path, origin: str | None = None) -> Check:
    """Whether ``path`` is a folder agentloom can write to; ``origin`` says why it is the data directory."""
    why = f" ({origin})" if origin else ""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        return Check(
            "data directory writable",
            False,
            f"{path}{why}: {exc.strerror or exc}. Set AGENTLOOM_DATA_DIR to a writable folder.",
        )
    return Check("data directory writable", True, f"{path.resolve()}{why}")


def summary(checks: list[Check]) -> str:
    """``ok`` when every check passes, ``degraded`` when only optional ones fail, else ``error``."""
    if all(c.ok for c in checks):
        return "ok"
    return "error" if any(c.required and not c.ok for c in checks) else "degraded"
