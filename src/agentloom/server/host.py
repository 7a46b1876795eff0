"""Builds the MCP server: every enabled pack (the core pack's health tools included), each isolated from the others."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

from agentloom import __version__
from agentloom.core.errors import AgentloomError
from agentloom.core.health import Check, directory_writable, modules_importable, summary
from agentloom.core.settings import Settings
from agentloom.server.calls import LoomServer
from agentloom.server.packs import LoadedPack, Pack, PackContext
from agentloom.server.protocol import configure_protocol
from agentloom.server.services import Services
from agentloom.server.toolcache import ToolCache

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agentloom.packs"
CORE_PACK = "core"  # health and breaker_reset: loaded whatever --packs says, unless disabled by name
INSTRUCTIONS = (
    "agentloom gives you tools grouped in packs. Call `health` to see which packs are loaded "
    "and whether their stores and the embedding model work."
)

PackStatus = Literal["loaded", "failed", "disabled", "not-installed"]


@dataclass
class PackReport:
    name: str
    status: PackStatus
    reason: str | None = None
    tools: list[str] = field(default_factory=list)
    origin: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class PackLoadError(Exception):
    pass


class Host:
    """One server process: settings, shared services, the MCP server and its packs."""

    def __init__(
        self,
        settings: Settings,
        packs: list[EntryPoint] | None = None,
        *,
        name: str = "agentloom",
        instructions: str = INSTRUCTIONS,
    ) -> None:
        self.settings = settings
        # Built once and handed to every pack's setup; a pack's command line builds its own the same
        # way (Pack.open), so a pack makes its state the same way in both.
        self.services = Services(settings)
        self.breakers = self.services.breakers
        self.embeddings = self.services.embeddings
        self.server = LoomServer(
            name,
            version=__version__,
            instructions=instructions,
            log_level=settings.log_level,
            tool_cache=ToolCache(settings.cache_dir),
        )
        self.packs: dict[str, LoadedPack[Any]] = {}
        self.reports: list[PackReport] = []
        # Packs skipped because an optional extra is not installed, and not asked for by name:
        # a base install (`pipx install agentloom`) is healthy without them.
        self._extras_missing: set[str] = set()
        self._load_packs(discover_packs() if packs is None else packs)
        self.server.save_tool_cache()
        configure_protocol(self.server)

    # -- packs -------------------------------------------------------------------
    def _load_packs(self, found: list[EntryPoint]) -> None:
        names = {ep.name for ep in found}
        for ep in sorted(found, key=lambda e: (e.name != CORE_PACK, e.name)):
            if not self._enabled(ep.name):
                self.reports.append(PackReport(ep.name, "disabled", "disabled by configuration", origin=ep.value))
                continue
            self.reports.append(self._load_pack(ep))
        for pattern in self.unmatched_tools():
            log.error("tools setting: %r matches no tool of the loaded packs", pattern)
        for wanted in self.settings.packs or []:
            if wanted not in names:
                known = ", ".join(sorted(names)) or "none"
                reason = f"no installed pack is called {wanted!r}; installed packs: {known}"
                log.error("pack %s skipped: %s", wanted, reason)
                self.reports.append(PackReport(wanted, "not-installed", reason))

    def _load_pack(self, ep: EntryPoint) -> PackReport:
        try:
            pack = _resolve(ep)
            missing = [m for m in pack.requires if importlib.util.find_spec(m) is None]
            if missing:
                if pack.install and ep.name not in (self.settings.packs or []):
                    self._extras_missing.add(ep.name)
                raise PackLoadError(
                    f"missing dependency {', '.join(missing)}: install it "
                    f"(pip install {pack.install or ' '.join(missing)})"
                )
            taken = set(self.server.tool_names())
            clashes = [t.name for t in pack.tools if t.name in taken]
            if clashes:
                raise PackLoadError(f"tool names already registered by another pack: {', '.join(clashes)}")
            loaded = pack.start(PackContext(ep.name, self.settings, self.services, self))
            # Tools are added only after setup succeeded, so a failing pack leaves none behind. The
            # tools setting chooses among them (the core pack's are always listed: health says what is).
            chosen = [t for t in loaded.tools if ep.name == CORE_PACK or self.settings.tool_enabled(t.name)]
            for spec in chosen:
                self.server.add_strict_tool(
                    spec.fn,
                    name=spec.name,
                    title=spec.title,
                    description=spec.description,
                    annotations=spec.annotations,
                    structured_output=spec.structured_output,
                )
        except Exception as exc:  # a broken pack must never take the server down
            reason = str(exc) if isinstance(exc, (PackLoadError, AgentloomError)) else f"{type(exc).__name__}: {exc}"
            log.error("pack %s skipped: %s", ep.name, reason, exc_info=log.isEnabledFor(logging.DEBUG))
            return PackReport(ep.name, "failed", reason, origin=ep.value)
        self.packs[ep.name] = loaded
        log.info("pack %s loaded: %d tools", ep.name, len(chosen))
        return PackReport(ep.name, "loaded", None, [t.name for t in chosen], ep.value)

    def _enabled(self, name: str) -> bool:
        if name == CORE_PACK:
            return name not in self.settings.disabled_packs
        return self.settings.pack_enabled(name)

    def unmatched_tools(self) -> list[str]:
        """Names or globs of the tools setting that choose no tool (a typo lists nothing)."""
        import fnmatch

        offered = [t.name for p in self.packs.values() for t in p.tools]
        return [p for p in self.settings.tools or [] if not fnmatch.filter(offered, p)]

    @property
    def tool_names(self) -> set[str]:
        return set(self.server.tool_names())

    # -- health ------------------------------------------------------------------
    def health(self, *, check_model: bool = True, progress: Callable[[str], None] | None = None) -> dict[str, object]:
        checks: list[Check] = modules_importable()
        checks.append(directory_writable(self.settings.data_dir, self.settings.data_dir_origin))
        if check_model:
            model = self.embeddings.check(progress)
            checks.append(
                Check(f"embedding model {model['model'] or '(default)'}", bool(model["ok"]), str(model["detail"]))
            )
        for report in self.reports:
            if report.status in ("failed", "not-installed"):
                required = report.name not in self._extras_missing
                checks.append(Check(f"pack {report.name}", False, report.reason or "failed", required=required))
        for pattern in self.unmatched_tools():
            checks.append(
                Check("tools setting", False, f"{pattern!r} matches no tool of the loaded packs", required=False)
            )
        for name, pack in self.packs.items():
            try:
                checks.extend(pack.checks())
            except Exception as exc:
                checks.append(Check(f"pack {name} health", False, f"{type(exc).__name__}: {exc}"))
        breakers = self.breakers.statuses()
        for b in breakers:
            if b.state != "closed":
                checks.append(Check(f"breaker {b.name}", False, f"{b.state.value}: {b.reason}", required=False))
        return {
            "status": summary(checks),
            "version": __version__,
            "checks": [c.as_dict() for c in checks],
            "packs": [r.as_dict() for r in self.reports],
            "breakers": [b.as_dict() for b in breakers],
        }


def discover_packs() -> list[EntryPoint]:
    return list(entry_points(group=ENTRY_POINT_GROUP))


def _resolve(ep: EntryPoint) -> Pack[Any]:
    obj = ep.load()
    if not isinstance(obj, Pack) and callable(obj):
        obj = obj()  # a factory
    if not isinstance(obj, Pack):
        raise PackLoadError(f"entry point {ep.value} is {type(obj).__name__}, expected agentloom Pack")
    return obj
