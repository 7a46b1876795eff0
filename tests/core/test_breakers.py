import logging
import re
from collections.abc import Callable

import pytest

from agentloom.core.breakers import (
    BreakerRegistry,
    CircuitBreaker,
    CircuitOpenError,
    DependencyFailure,
    State,
)
from agentloom.core.dependency import Dependency
from agentloom.core.errors import DependencyUnavailable, NotFoundError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guarded(breaker: CircuitBreaker) -> Dependency:
    return Dependency(breaker.name, breaker, is_failure=lambda exc: False, describe=str)


def raises(exc: Exception) -> Callable[[], None]:
    def fn() -> None:
        raise exc

    return fn


def fail(breaker: CircuitBreaker, reason: str = "connection refused") -> None:
    with pytest.raises(DependencyUnavailable, match=reason):
        guarded(breaker).call(raises(DependencyFailure(reason)))


def ok(breaker: CircuitBreaker) -> str:
    return guarded(breaker).call(lambda: "fine")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breaker(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker("flowise", failure_threshold=3, reset_timeout=300, clock=clock)


def test_opens_after_three_consecutive_failures(breaker: CircuitBreaker) -> None:
    fail(breaker)
    fail(breaker)
    assert breaker.state is State.CLOSED
    fail(breaker, "HTTP 503")
    status = breaker.status()
    assert status.state is State.OPEN
    assert status.reason == "HTTP 503"
    assert status.retry_in_seconds == pytest.approx(300)


def test_success_resets_the_count_while_closed(breaker: CircuitBreaker) -> None:
    fail(breaker)
    fail(breaker)
    assert ok(breaker) == "fine"
    fail(breaker)
    fail(breaker)
    assert breaker.state is State.CLOSED
    assert breaker.status().failures == 2


def test_caller_errors_never_count(breaker: CircuitBreaker) -> None:
    for _ in range(5):
        with pytest.raises(ValueError):
            guarded(breaker).call(raises(ValueError("HTTP 404: no such chatflow")))
    assert breaker.state is State.CLOSED
    assert breaker.status().failures == 0


def test_open_breaker_fails_fast_without_calling(breaker: CircuitBreaker, clock: Clock) -> None:
    for _ in range(3):
        fail(breaker)
    calls = []
    clock.now += 120
    with pytest.raises(CircuitOpenError) as err:
        guarded(breaker).call(lambda: calls.append(1))
    assert calls == []
    assert "flowise unavailable" in str(err.value)
    assert "retry in 180s" in str(err.value)
    assert len(str(err.value).split()) < 50  # compact


def test_half_open_after_timeout_lets_one_trial_through(breaker: CircuitBreaker, clock: Clock) -> None:
    for _ in range(3):
        fail(breaker)
    clock.now += 300
    assert breaker.state is State.HALF_OPEN
    breaker.before_call()  # the single trial
    with pytest.raises(CircuitOpenError, match="trial call in progress"):
        breaker.before_call()
    breaker.record_success()
    assert breaker.state is State.CLOSED
    assert breaker.status().failures == 0


def test_failed_trial_opens_again_for_a_full_timeout(breaker: CircuitBreaker, clock: Clock) -> None:
    for _ in range(3):
        fail(breaker)
    clock.now += 301
    fail(breaker, "still down")
    status = breaker.status()
    assert status.state is State.OPEN
    assert status.retry_in_seconds == pytest.approx(300)


def test_caller_error_during_trial_releases_the_trial(breaker: CircuitBreaker, clock: Clock) -> None:
    for _ in range(3):
        fail(breaker)
    clock.now += 300
    with pytest.raises(KeyError):
        guarded(breaker).call(raises(KeyError("bad input")))
    assert breaker.state is State.HALF_OPEN
    assert ok(breaker) == "fine"
    assert breaker.state is State.CLOSED


def test_manual_reset(breaker: CircuitBreaker) -> None:
    for _ in range(3):
        fail(breaker)
    breaker.reset()
    status = breaker.status()
    assert (status.state, status.failures, status.reason, status.retry_in_seconds) == (State.CLOSED, 0, None, None)


def test_every_transition_is_logged_with_a_timestamp(
    breaker: CircuitBreaker, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentloom.core.breakers")
    for _ in range(3):
        fail(breaker)
    clock.now += 300
    fail(breaker)  # half-open -> open
    clock.now += 300
    ok(breaker)  # half-open -> closed
    transitions = [r.getMessage() for r in caplog.records]
    expected = ["closed -> open", "open -> half-open", "half-open -> open", "open -> half-open", "half-open -> closed"]
    assert [next(e for e in expected if e in m) for m in transitions] == expected
    assert all(" at 20" in m for m in transitions)  # ISO timestamp


def test_registry_keeps_one_breaker_per_dependency_with_configured_thresholds(clock: Clock) -> None:
    registry = BreakerRegistry(failure_threshold=2, reset_timeout=10, clock=clock)
    a = registry.get("embeddings:openai")
    assert registry.get("embeddings:openai") is a
    b = registry.get("chroma")
    fail(a)
    fail(a)
    assert a.state is State.OPEN and b.state is State.CLOSED
    assert [s.name for s in registry.statuses()] == ["chroma", "embeddings:openai"]
    assert registry.reset("embeddings:openai").state is State.CLOSED
    with pytest.raises(NotFoundError, match="known breakers: chroma, embeddings:openai"):
        registry.reset("flowise")


# -- exact values (killing what mutation testing found the tests above let through) ---------------
def test_the_defaults_are_three_failures_and_five_minutes(clock: Clock) -> None:
    for made in (CircuitBreaker("x", clock=clock), BreakerRegistry(clock=clock).get("x")):
        fail(made)
        fail(made)
        assert made.state is State.CLOSED
        fail(made)
        assert made.state is State.OPEN
        clock.now += 299.9
        assert made.state is State.OPEN
        clock.now += 0.1
        assert made.state is State.HALF_OPEN
        clock.now -= 300


def test_status_says_exactly_when_and_why(breaker: CircuitBreaker, clock: Clock) -> None:
    from tests.conftest import TIMESTAMP

    closed = breaker.status()
    assert (closed.reason, closed.retry_in_seconds, closed.opened_at, closed.failures) == (None, None, None, 0)
    for _ in range(3):
        fail(breaker, "HTTP 503")
    clock.now += 120
    status = breaker.status()
    assert status.retry_in_seconds == 180.0 and status.reason == "HTTP 503"
    assert status.opened_at is not None and TIMESTAMP.fullmatch(status.opened_at)
    with pytest.raises(CircuitOpenError) as refused:
        ok(breaker)
    assert str(refused.value).endswith("unavailable (circuit open: HTTP 503); retry in 180s or reset the breaker.")
    clock.now += 179.6
    assert breaker.status().retry_in_seconds == pytest.approx(0.4)
    with pytest.raises(CircuitOpenError, match="retry in 0s or"):
        ok(breaker)
    clock.now += 0.4
    assert breaker.status().opened_at == status.opened_at  # half-open: still says when it opened
    assert ok(breaker) == "fine"
    assert breaker.status().reason is None and breaker.status().opened_at is None


def test_each_transition_is_logged_once_with_its_reason_when_it_opens(
    breaker: CircuitBreaker, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentloom.core.breakers")
    for _ in range(3):
        fail(breaker, "connection refused")
    clock.now += 300
    assert ok(breaker) == "fine"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    from tests.conftest import TIMESTAMP

    stamp = TIMESTAMP.pattern
    assert re.fullmatch(rf"circuit flowise: closed -> open at {stamp} \(connection refused\)", lines[0]), lines[0]
    assert re.fullmatch(rf"circuit flowise: open -> half-open at {stamp}", lines[1]), lines[1]
    assert re.fullmatch(rf"circuit flowise: half-open -> closed at {stamp}", lines[2]), lines[2]


def test_resetting_an_unknown_breaker_names_the_known_ones() -> None:
    registry = BreakerRegistry()
    with pytest.raises(NotFoundError, match=r"breaker 'nope' not found; known breakers: none yet\.$"):
        registry.reset("nope")
    registry.get("chroma")
    with pytest.raises(NotFoundError, match=r"known breakers: chroma\.$"):
        registry.reset("nope")


def test_a_status_as_the_health_tool_shows_it(breaker: CircuitBreaker, clock: Clock) -> None:
    for _ in range(3):
        fail(breaker, "HTTP 503")
    shown = breaker.status().as_dict()
    assert shown == {
        "name": "flowise",
        "state": "open",
        "failures": 3,
        "reason": "HTTP 503",
        "retry_in_seconds": 300.0,
        "opened_at": shown["opened_at"],
    }
    assert isinstance(shown["opened_at"], str)
