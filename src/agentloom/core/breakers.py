"""Circuit breakers for remote dependencies.

One breaker per dependency. It opens after ``failure_threshold`` consecutive
dependency-level failures (network error, timeout, 5xx), stays open for
``reset_timeout`` seconds, then lets a single trial call through (half-open).
A success closes it and resets the count; a failed trial opens it again.
Caller mistakes (4xx, validation) never count. Calls go through
:class:`agentloom.core.dependency.Dependency`, which drives this state machine.

No maintained library fits: pybreaker has no injectable clock, no per-call
classification beyond exception types, and no asyncio support.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentloom.core.errors import DependencyUnavailable, NotFoundError
from agentloom.core.timestamps import iso

log = logging.getLogger(__name__)


class State(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class DependencyFailure(Exception):
    """A failure of the dependency itself: network error, timeout, 5xx. Counts towards opening."""


class CircuitOpenError(DependencyUnavailable):
    """Raised instead of calling a dependency whose breaker is open (a compact message)."""


@dataclass(frozen=True)
class BreakerStatus:
    name: str
    state: State
    failures: int
    reason: str | None
    retry_in_seconds: float | None
    opened_at: str | None = None  # when it last opened (open or half-open), in the one timestamp format

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "state": self.state.value,
            "failures": self.failures,
            "reason": self.reason,
            "retry_in_seconds": self.retry_in_seconds,
            "opened_at": self.opened_at,
        }


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        failure_threshold: int = 3,
        reset_timeout: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.failure_threshold = failure_threshold
        self.reset_timeout = reset_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._state = State.CLOSED
        self._failures = 0
        self._reason: str | None = None
        self._opened_at = 0.0  # on ``clock`` (monotonic): for the retry time
        self._opened_wall: str | None = None  # the same moment as shown to people and clients
        self._trial_in_flight = False

    # -- state -----------------------------------------------------------------
    def _transition(self, new: State) -> None:
        old, self._state = self._state, new
        log.warning(
            "circuit %s: %s -> %s at %s%s",
            self.name,
            old.value,
            new.value,
            iso(),
            f" ({self._reason})" if new is State.OPEN and self._reason else "",
        )

    def _refresh(self) -> None:
        if self._state is State.OPEN and self._clock() - self._opened_at >= self.reset_timeout:
            self._transition(State.HALF_OPEN)
            self._trial_in_flight = False

    @property
    def state(self) -> State:
        with self._lock:
            self._refresh()
            return self._state

    def status(self) -> BreakerStatus:
        with self._lock:
            self._refresh()
            retry = None
            if self._state is State.OPEN:
                retry = max(0.0, self.reset_timeout - (self._clock() - self._opened_at))
            opened = self._opened_wall if self._state is not State.CLOSED else None
            return BreakerStatus(self.name, self._state, self._failures, self._reason, retry, opened)

    # -- protocol --------------------------------------------------------------
    def before_call(self) -> None:
        """Admit a call or raise :class:`CircuitOpenError`."""
        with self._lock:
            self._refresh()
            if self._state is State.OPEN:
                retry = max(0.0, self.reset_timeout - (self._clock() - self._opened_at))
                raise CircuitOpenError(
                    f"{self.name} unavailable (circuit open: {self._reason}); retry in {retry:.0f}s "
                    "or reset the breaker."
                )
            if self._state is State.HALF_OPEN:
                if self._trial_in_flight:
                    raise CircuitOpenError(f"{self.name} unavailable (circuit half-open, trial call in progress).")
                self._trial_in_flight = True

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            self._trial_in_flight = False
            if self._state is not State.CLOSED:
                self._reason = None
                self._transition(State.CLOSED)

    def record_failure(self, reason: str) -> None:
        with self._lock:
            self._failures += 1
            self._reason = reason
            self._trial_in_flight = False
            if self._state is State.HALF_OPEN or (
                self._state is State.CLOSED and self._failures >= self.failure_threshold
            ):
                self._opened_at = self._clock()
                self._opened_wall = iso()
                self._transition(State.OPEN)

    def record_ignored(self) -> None:
        """The call ended with a caller-side error: no verdict on the dependency."""
        with self._lock:
            self._trial_in_flight = False

    def reset(self) -> None:
        """Manual reset: close the breaker and forget failures."""
        with self._lock:
            self._failures = 0
            self._reason = None
            self._trial_in_flight = False
            if self._state is not State.CLOSED:
                self._transition(State.CLOSED)


class BreakerRegistry:
    """Breakers by dependency name, created on first use with the configured thresholds."""

    def __init__(
        self, failure_threshold: int = 3, reset_timeout: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.failure_threshold = failure_threshold
        self.reset_timeout = reset_timeout
        self._clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> CircuitBreaker:
        with self._lock:
            breaker = self._breakers.get(name)
            if breaker is None:
                breaker = CircuitBreaker(name, self.failure_threshold, self.reset_timeout, self._clock)
                self._breakers[name] = breaker
            return breaker

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._breakers)

    def statuses(self) -> list[BreakerStatus]:
        return [self.get(name).status() for name in self.names()]

    def reset(self, name: str) -> BreakerStatus:
        if name not in self.names():
            known = ", ".join(self.names()) or "none yet"
            raise NotFoundError(f"breaker {name!r} not found; known breakers: {known}.")
        breaker = self.get(name)
        breaker.reset()
        return breaker.status()
