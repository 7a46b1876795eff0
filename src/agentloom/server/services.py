"""What the packs of one process share, built one way for the server and for the command line.

A server (``agentloom.server.host.Host``) builds these once and hands them to every pack; a pack's
command (``agentloom skills search``) builds them for itself. Either way each pack's ``open``
receives the same kind of object, so a pack's state is made the same way in both.

Part of the pack interface, beside ``packs.py``: it knows the embedding service, which ``core`` may not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentloom.core.breakers import BreakerRegistry

if TYPE_CHECKING:
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService


@dataclass(frozen=True)
class Services:
    """One breaker registry (thresholds from the settings) and the embedding service that uses it."""

    breakers: BreakerRegistry
    embeddings: EmbeddingService

    @classmethod
    def build(cls, settings: Settings) -> Services:
        # The embedding service (and the model libraries under it) is imported here, when a pack or
        # server needs it: a command that never embeds does not pay for it.
        from agentloom.embeddings import EmbeddingService

        breakers = BreakerRegistry(settings.breakers.failure_threshold, settings.breakers.reset_timeout_seconds)
        return cls(breakers, EmbeddingService(settings, breakers))


def pack_folder(settings: Settings, name: str) -> Path:
    """The pack's own folder under the data directory, created on demand."""
    path = settings.data_dir / name
    path.mkdir(parents=True, exist_ok=True)
    return path
