"""The Chroma client: embedded on disk or a remote server, created on first use.

chromadb takes about a second to import, so nothing here imports it before a tool needs
it. Remote calls go through the ``chroma`` circuit breaker; an unreachable server gives a
short error that names host and port instead of a traceback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from agentloom.core.breakers import BreakerRegistry, DependencyFailure
from agentloom.core.errors import AgentloomError, DependencyUnavailable
from agentloom.packs.vectors.settings import VectorSettings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

log = logging.getLogger(__name__)
T = TypeVar("T")

BREAKER = "chroma"


class ChromaConnection:
    def __init__(self, settings: VectorSettings, breakers: BreakerRegistry) -> None:
        self.settings = settings
        self.breaker = breakers.get(BREAKER) if settings.mode == "remote" else None
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
        with self.guard():
            return chromadb.HttpClient(
                host=self.settings.host,
                port=self.settings.port,
                ssl=self.settings.ssl,
                headers=self.settings.headers or None,
                settings=options,
            )

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Translate Chroma failures into clear errors; count server failures on the breaker."""
        if self.breaker is not None:
            self.breaker.before_call()
        try:
            yield
        except AgentloomError:
            if self.breaker is not None:
                self.breaker.record_ignored()
            raise
        except Exception as exc:
            unreachable = _is_connection_failure(exc)
            if self.breaker is not None:
                if unreachable:
                    self.breaker.record_failure(f"{type(exc).__name__}: {exc}"[:200])
                else:
                    self.breaker.record_ignored()
            if unreachable:
                raise DependencyUnavailable(
                    f"Chroma server at {self.settings.host}:{self.settings.port} is unreachable "
                    f"({_short(exc)}). Start it (chroma run --host {self.settings.host} --port {self.settings.port}) "
                    "or fix AGENTLOOM_VECTORS__HOST / AGENTLOOM_VECTORS__PORT."
                ) from None
            raise
        else:
            if self.breaker is not None:
                self.breaker.record_success()

    def call(self, fn: Callable[[], T]) -> T:
        with self.guard():
            return fn()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]


def _is_connection_failure(exc: BaseException) -> bool:
    """Network errors, timeouts and 5xx answers; not the caller's mistakes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (ConnectionError, TimeoutError, DependencyFailure)):
            return True
        name = type(seen).__name__
        if name in {"ConnectError", "ConnectTimeout", "ReadTimeout", "RemoteProtocolError", "ReadError"}:
            return True
        text = str(seen)
        if "Could not connect to a Chroma server" in text or "Connection refused" in text:
            return True
        status = getattr(getattr(seen, "response", None), "status_code", None)
        if isinstance(status, int) and status >= 500:
            return True
        seen = seen.__cause__ or seen.__context__
    return False

