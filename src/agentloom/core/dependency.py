"""The one guarded call: how every pack reaches a network service or a store.

A :class:`Dependency` wraps exactly one call to the outside (an HTTP request, a Chroma
operation) and nothing around it. It asks the dependency's circuit breaker first, counts
only failures of the dependency itself (the ``is_failure`` rule: connection errors,
timeouts, 5xx; never the caller's mistakes), and turns such a failure into a
:class:`DependencyUnavailable` whose message names the service, what went wrong and the
fix. Every tool therefore reports an outage the same way.

Guarded calls must not nest. An outer guard around a function that makes its own
guarded calls would, with the breaker half-open, spend the single trial call on itself
and make the inner call fail with "trial call in progress"; it would also blame the
outer service for the inner one's failure. A nested call raises at once, so such code
fails its first test instead of misbehaving in production.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import TypeVar

from agentloom.core.breakers import CircuitBreaker, DependencyFailure
from agentloom.core.errors import AgentloomError, DependencyUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

_active: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentloom_guarded_call", default=None)


class NestedGuardError(RuntimeError):
    """A guarded call was made inside another one: a bug in the calling code."""


class Dependency:
    """A named outside service and the single way to call it.

    ``is_failure(exc)`` says whether an exception is the service's fault (it then counts
    on the breaker and becomes :class:`DependencyUnavailable`); ``describe(exc)`` writes
    that error's message. Exceptions that are not failures (a 404, a validation error)
    pass through unchanged for the caller to translate, and do not count.
    """

    def __init__(
        self,
        name: str,
        breaker: CircuitBreaker | None,
        *,
        is_failure: Callable[[BaseException], bool],
        describe: Callable[[BaseException], str],
    ) -> None:
        self.name = name
        self.breaker = breaker
        self._is_failure = is_failure
        self._describe = describe

    def call(self, fn: Callable[[], T]) -> T:
        outer = _active.get()
        if outer is not None:
            raise NestedGuardError(
                f"guarded call to {self.name} made inside a guarded call to {outer}: "
                "guard only the network or store call itself"
            )
        token = _active.set(self.name)
        try:
            return self._call(fn)
        finally:
            _active.reset(token)

    def _call(self, fn: Callable[[], T]) -> T:
        breaker = self.breaker
        if breaker is not None:
            breaker.before_call()  # CircuitOpenError (a DependencyUnavailable) when open
        try:
            result = fn()
        except AgentloomError:
            if breaker is not None:
                breaker.record_ignored()
            raise
        except Exception as exc:
            if not (isinstance(exc, DependencyFailure) or self._is_failure(exc)):
                if breaker is not None:
                    breaker.record_ignored()
                raise
            message = self._describe(exc)
            if breaker is not None:
                breaker.record_failure(message[:200])
            log.debug("%s failed", self.name, exc_info=True)
            raise DependencyUnavailable(message) from exc
        if breaker is not None:
            breaker.record_success()
        return result


def caused_by(exc: BaseException, test: Callable[[BaseException], bool]) -> bool:
    """Whether ``exc`` or anything in its ``__cause__``/``__context__`` chain passes ``test``.

    Client libraries often re-raise a transport error as their own type (chromadb turns
    httpx's ConnectError into a ValueError); the chain still holds the original.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if test(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def first_line(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]
