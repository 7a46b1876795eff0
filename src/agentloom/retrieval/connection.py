"""The Chroma client: embedded on disk or a remote server, created on first use.

chromadb takes about a second to import, so nothing here imports it before a tool needs
it. Remote calls go through the ``chroma`` circuit breaker; an unreachable server gives a
short error that names host and port instead of a traceback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from agentloom.core.breakers import BreakerRegistry
from agentloom.core.dependency import Dependency, caused_by, first_line

if TYPE_CHECKING:
    from pathlib import Path

    from chromadb.api import ClientAPI

log = logging.getLogger(__name__)
T = TypeVar("T")

BREAKER = "chroma"


class ChromaPlace(Protocol):
    """Where a Chroma lives, as a pack's settings say it (the vectors pack's ``VectorSettings``)."""

    @property
    def mode(self) -> Literal["embedded", "remote"]: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def ssl(self) -> bool: ...
    @property
    def headers(self) -> dict[str, str]: ...
    def describe(self) -> str: ...


@dataclass(frozen=True)
class EmbeddedChroma:
    """A Chroma on disk in ``path``: for a pack that keeps its own and never a server."""

    path: Path
    mode: Literal["embedded", "remote"] = "embedded"
    host: str = "127.0.0.1"
    port: int = 8000
    ssl: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"embedded Chroma at {self.path}"


class ChromaConnection:
    def __init__(self, settings: ChromaPlace, breakers: BreakerRegistry, *, fix: str = "") -> None:
        """``fix`` names the settings that choose the server, for the message of an unreachable one."""
        self.settings = settings
        self._fix = fix
        remote = settings.mode == "remote"
        # Embedded Chroma has no server to be down: its errors are the caller's or bugs, never outages.
        self.dependency = Dependency(
            BREAKER,
            breakers.get(BREAKER) if remote else None,
            is_failure=is_server_failure if remote else (lambda exc: False),
            describe=self._unreachable,
        )
        self._client: ClientAPI | None = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self.settings.describe()

    def client(self) -> ClientAPI:
        with self._lock:
            if self._client is None:
                self._client = self._open()
            return self._client

    def _open(self) -> ClientAPI:
        import chromadb

        options = chromadb.Settings(anonymized_telemetry=False, allow_reset=False)
        if self.settings.mode == "embedded":
            assert self.settings.path is not None
            self.settings.path.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(self.settings.path), settings=options)
        return self.call(
            lambda: chromadb.HttpClient(
                host=self.settings.host,
                port=self.settings.port,
                ssl=self.settings.ssl,
                headers=self.settings.headers or None,
                settings=options,
            )
        )

    def call(self, fn: Callable[[], T]) -> T:
        """Run one Chroma operation (never one that makes other guarded calls)."""
        return self.dependency.call(fn)

    def _unreachable(self, exc: BaseException) -> str:
        where = f"Chroma server at {self.settings.host}:{self.settings.port}"
        if not caused_by(exc, _is_transport_error):
            return f"{where} failed with a server error ({first_line(exc)}); check its log, then retry."
        return (
            f"{where} is unreachable ({first_line(exc)}). "
            f"Start it (chroma run --host {self.settings.host} --port {self.settings.port}) "
            f"or fix {self._fix or 'its host and port'}."
        )


def is_server_failure(exc: BaseException) -> bool:
    """Network errors, timeouts and 5xx answers, by type; never the caller's mistakes."""

    def failure(e: BaseException) -> bool:
        import httpx
        from chromadb.errors import ChromaError

        if _is_transport_error(e):
            return True
        if isinstance(e, httpx.HTTPStatusError):
            return e.response.status_code >= 500
        return isinstance(e, ChromaError) and e.code() >= 500

    return caused_by(exc, failure)


def _is_transport_error(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, (ConnectionError, TimeoutError, httpx.TransportError))
