"""The core pack's tools: ``health`` and ``breaker_reset``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import WithJsonSchema
from typing_extensions import TypedDict

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.work import current
from agentloom.server.packs import HostServices, Pack, PackContext
from agentloom.server.work import run_work


class CheckResult(TypedDict):
    name: str
    ok: bool
    detail: str
    required: bool


class PackResult(TypedDict):
    name: str
    status: Literal["loaded", "failed", "disabled", "not-installed"]
    reason: str | None
    tools: list[str]
    origin: str | None


class BreakerResult(TypedDict):
    name: str
    state: Literal["closed", "open", "half-open"]
    failures: int
    reason: str | None
    retry_in_seconds: float | None
    opened_at: str | None  # when it last opened, e.g. 2026-11-23T11:32:00.123Z; null while closed


class HealthResult(TypedDict):
    status: Literal["ok", "degraded", "error"]
    version: str
    checks: list[CheckResult]
    packs: list[PackResult]
    # Checked as BreakerResult; listed once, in breaker_reset's output schema (tools/list says each thing once).
    breakers: Annotated[
        list[BreakerResult],
        WithJsonSchema({"type": "array", "items": {"type": "object"}, "description": "each as breaker_reset returns"}),
    ]


pack: Pack[Core] = Pack("core", "Server health and circuit breakers")


@dataclass(frozen=True)
class Core:
    """The server's own services, as the core pack's tools see them."""

    host: HostServices
    breakers: BreakerRegistry


@pack.setup
def setup(ctx: PackContext) -> Core:
    if ctx.host is None:
        raise TypeError("the core pack is the server's own: a command cannot open it")
    return Core(ctx.host, ctx.breakers)


@pack.tool(title="Server health", read_only=True)
async def health(core: Core, check_model: bool = True) -> HealthResult:
    """Server health: dependencies, data, embedding model (unless check_model is false), packs, breakers."""
    # the first run may build the model: its messages become progress notifications
    report = await run_work("health", lambda: core.host.health(check_model=check_model, progress=current().note))
    return report  # type: ignore[return-value]  # Host.health builds the dict HealthResult describes


@pack.tool(title="Reset a circuit breaker", idempotent=True)
async def breaker_reset(core: Core, name: str) -> BreakerResult:
    """Close a dependency's circuit breaker now; `health` lists them."""
    return core.breakers.reset(name).as_dict()  # type: ignore[return-value]  # as_dict has BreakerResult's keys
