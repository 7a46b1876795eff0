"""Tools every server has, whatever packs are loaded: ``health`` and ``breaker_reset``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations
from typing_extensions import TypedDict

if TYPE_CHECKING:
    from agentloom.server.host import Host


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


class HealthResult(TypedDict):
    status: Literal["ok", "degraded", "error"]
    version: str
    checks: list[CheckResult]
    packs: list[PackResult]
    breakers: list[BreakerResult]


def register_builtin_tools(host: Host) -> None:
    server = host.server

    async def health(ctx: Context, check_model: bool = True) -> HealthResult:
        """Report the server's health: dependencies importable, data directory writable, the
        embedding model loading, each pack loaded or skipped (with the reason) and its stores
        reachable, and the state of every circuit breaker. `status` is ok, degraded (only
        optional checks failed) or error."""
        steps = 0

        def progress(message: str) -> None:  # the first run may export the model: say so
            nonlocal steps
            steps += 1
            anyio.from_thread.run(ctx.report_progress, steps, None, message)

        report = await anyio.to_thread.run_sync(lambda: host.health(check_model=check_model, progress=progress))
        return report  # type: ignore[return-value]

    async def breaker_reset(name: str) -> BreakerResult:
        """Close the circuit breaker of one dependency now (for example after fixing it) instead
        of waiting for its retry time. `health` lists the breakers and their names."""
        return host.breakers.reset(name).as_dict()  # type: ignore[return-value]

    server.add_tool(
        health,
        title="Server health",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    server.add_tool(
        breaker_reset,
        title="Reset a circuit breaker",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    host.tool_names.update({"health", "breaker_reset"})
