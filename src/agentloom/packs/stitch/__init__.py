"""The stitch pack: compact MCP tools over a running Stitch server's HTTP API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloom.core.services import Services
from agentloom.packs.stitch.client import StitchClient, StitchPackSettings
from agentloom.packs.stitch.tools import pack

if TYPE_CHECKING:
    from agentloom.core.settings import Settings

__all__ = ["open", "pack"]


def open(settings: Settings, services: Services | None = None) -> StitchClient:
    """The pack's state as every pack's ``open`` makes it: the client to the configured Stitch server,
    behind the shared breakers (built from ``settings`` when not given)."""
    services = services if services is not None else Services.build(settings)
    return StitchClient(settings.for_pack(pack.name, StitchPackSettings), services.breakers)
