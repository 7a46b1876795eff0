"""What the packs of one process share, built one way for the server and for the command line.

A server (``agentloom.server.host.Host``) builds these once and hands them to every pack through its
``PackContext``; a pack's command (``agentloom skills search``) gets its own through ``Pack.open``.
Either way the pack's one setup receives the same kind of object, so its state is made the same way.

Part of the pack interface, beside ``packs.py``: it knows the embedding service, which ``core`` may not.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from agentloom.core.breakers import BreakerRegistry

if TYPE_CHECKING:
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService


class Services:
    """One breaker registry (thresholds from the settings) and the embedding service that uses it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.breakers = BreakerRegistry(settings.breakers.failure_threshold, settings.breakers.reset_timeout_seconds)
        self._embeddings: EmbeddingService | None = None
        self._lock = threading.Lock()

    @property
    def embeddings(self) -> EmbeddingService:
        # The embedding service (and the model libraries under it) is imported here, when a pack or
        # server first needs it: a command that never embeds does not pay for it.
        with self._lock:
            if self._embeddings is None:
                from agentloom.embeddings import EmbeddingService

                self._embeddings = EmbeddingService(self.settings, self.breakers)
            return self._embeddings
