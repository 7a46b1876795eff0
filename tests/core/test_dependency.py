"""The one guarded call: what counts, what a failure becomes, and why guards must not nest."""

from __future__ import annotations

import functools
from typing import NoReturn

import pytest

from agentloom.core.breakers import CircuitBreaker, CircuitOpenError, DependencyFailure, State
from agentloom.core.dependency import Dependency, NestedGuardError, caused_by, first_line
from agentloom.core.errors import AgentloomError, DependencyUnavailable


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _raise(exc: BaseException) -> NoReturn:
    raise exc


def service(breaker: CircuitBreaker) -> Dependency:
    return Dependency(
        "chroma",
        breaker,
        is_failure=lambda exc: caused_by(exc, lambda e: isinstance(e, ConnectionError)),
        describe=lambda exc: f"Chroma at 127.0.0.1:1 is unreachable ({first_line(exc)}); start it",
    )


def refuse() -> None:
    raise ConnectionRefusedError("Connection refused")


def test_a_dependency_failure_becomes_one_clear_error_and_counts() -> None:
    breaker = CircuitBreaker("chroma", failure_threshold=2)
    dep = service(breaker)
    with pytest.raises(DependencyUnavailable) as err:
        dep.call(refuse)
    assert str(err.value) == "Chroma at 127.0.0.1:1 is unreachable (Connection refused); start it"
    assert breaker.status().failures == 1


def test_a_wrapped_transport_error_is_found_through_the_exception_chain() -> None:
    dep = service(CircuitBreaker("chroma"))

    def wrapped() -> None:
        try:
            refuse()
        except ConnectionError:
            raise ValueError("Could not connect to a Chroma server") from None  # context kept

    with pytest.raises(DependencyUnavailable):
        dep.call(wrapped)


def test_caller_mistakes_pass_through_unchanged_and_do_not_count() -> None:
    breaker = CircuitBreaker("chroma", failure_threshold=1)
    dep = service(breaker)
    for exc in (KeyError("no such collection"), AgentloomError("collection 'x' not found")):
        with pytest.raises(type(exc)):
            dep.call(functools.partial(_raise, exc))
    assert breaker.state is State.CLOSED and breaker.status().failures == 0


def test_nested_guards_are_refused_at_once() -> None:
    outer = service(CircuitBreaker("chroma"))
    inner = Dependency(
        "embeddings:openai", CircuitBreaker("embeddings:openai"), is_failure=lambda e: False, describe=str
    )
    with pytest.raises(NestedGuardError, match="inside a guarded call to chroma"):
        outer.call(lambda: inner.call(lambda: 1))
    assert outer.call(lambda: 2) == 2  # the marker is released after the refusal


def test_half_open_trial_reaches_the_real_call() -> None:
    """The bug this module exists for: with nested guards, the outer one took the single
    half-open trial and the inner network call failed with 'trial call in progress'."""
    clock = Clock()
    breaker = CircuitBreaker("chroma", failure_threshold=1, reset_timeout=10, clock=clock)
    dep = service(breaker)
    with pytest.raises(DependencyUnavailable):
        dep.call(refuse)
    assert breaker.state is State.OPEN
    with pytest.raises(CircuitOpenError):
        dep.call(lambda: "not called")
    clock.now += 10
    assert breaker.state is State.HALF_OPEN
    # What the vectors store used to do: open the client (guarded) inside a guarded operation.
    with pytest.raises(NestedGuardError):
        dep.call(lambda: dep.call(lambda: "client"))
    assert breaker.state is State.HALF_OPEN  # the refused nesting did not spend the trial
    assert dep.call(lambda: "client") == "client"
    assert breaker.state is State.CLOSED


def test_explicit_dependency_failure_counts_with_its_own_message() -> None:
    breaker = CircuitBreaker("stitch", failure_threshold=1)
    dep = Dependency("stitch", breaker, is_failure=lambda e: False, describe=str)

    def down() -> None:
        raise DependencyFailure("Stitch server at http://127.0.0.1:1 answered HTTP 503")

    with pytest.raises(DependencyUnavailable, match="HTTP 503"):
        dep.call(down)
    assert breaker.state is State.OPEN
