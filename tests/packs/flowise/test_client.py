"""The Flowise API client and its circuit breaker, against a fake Flowise, with a test clock."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from agentloom.core.breakers import BreakerRegistry, CircuitOpenError, State
from agentloom.core.errors import AgentloomError, DependencyUnavailable, NotFoundError
from agentloom.packs.flowise.client import FlowiseClient
from agentloom.packs.flowise.settings import FlowiseSettings
from tests.packs.flowise.test_catalog import open_flowise, trim
from tests.packs.flowise.tokens import tokens


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def client_for(fake, breakers: BreakerRegistry) -> FlowiseClient:
    return FlowiseClient(FlowiseSettings(url=fake.url, api_key=fake.api_key), breakers)


def test_breaker_opens_after_three_server_failures_and_recovers(fake_flowise, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentloom")
    clock = Clock()
    breakers = BreakerRegistry(clock=clock)
    client = client_for(fake_flowise, breakers)
    breaker = breakers.get("flowise")

    fake_flowise.fail_next(2, 503)
    for _ in range(2):
        with pytest.raises(DependencyUnavailable, match="failed"):
            client.list_chatflows()
    assert client.list_chatflows() == []  # a success resets the count
    assert breaker.status().failures == 0

    for status in (500, 502, 504):
        fake_flowise.fail_next(1, status)
        with pytest.raises(DependencyUnavailable):
            client.list_chatflows()
    assert breaker.state is State.OPEN
    seen = len(fake_flowise.requests)
    with pytest.raises(CircuitOpenError) as opened:
        client.list_chatflows()
    assert len(fake_flowise.requests) == seen, "an open breaker does not call Flowise"
    assert "retry in 300s" in str(opened.value) and tokens(str(opened.value)) < 50

    clock.now += 299
    with pytest.raises(CircuitOpenError, match="retry in 1s"):
        client.list_chatflows()
    clock.now += 1
    assert breaker.state is State.HALF_OPEN
    fake_flowise.fail_next(1, 503)
    with pytest.raises(DependencyUnavailable):
        client.list_chatflows()  # the probe fails: open again
    assert breaker.state is State.OPEN
    clock.now += 300
    assert client.list_chatflows() == []  # the probe succeeds: closed
    assert breaker.state is State.CLOSED and breaker.status().failures == 0
    transitions = [r.getMessage() for r in caplog.records if "flowise" in r.getMessage() and "->" in r.getMessage()]
    assert len(transitions) >= 4, transitions  # closed->open, open->half-open, half-open->open, ...


def test_caller_errors_do_not_count(fake_flowise) -> None:
    breakers = BreakerRegistry(clock=Clock())
    client = client_for(fake_flowise, breakers)
    for _ in range(4):
        with pytest.raises(NotFoundError, match="not found"):
            client.get_chatflow(str(uuid.uuid4()))
        with pytest.raises(AgentloomError, match="400"):
            client.get_chatflow("not-a-uuid")
    fake_flowise.permissions = {"templates:marketplace"}
    for _ in range(3):
        with pytest.raises(AgentloomError, match="refused the API key"):
            client.list_chatflows()
    assert breakers.get("flowise").status().failures == 0 and breakers.get("flowise").state is State.CLOSED


@pytest.mark.slow
def test_stale_catalog_is_refreshed_before_a_build(fake_flowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    state = open_flowise(fake, tmp_path, catalog_max_age_hours=1)
    state.catalog.refresh()
    assert state.catalog.ensure() is None and not state.catalog.is_stale()
    catalog = state.catalog.state()
    assert catalog.refreshed_at is not None
    catalog.refreshed_at -= 2 * 3600  # two hours old
    fake.node("chatOpenAI")["version"] = 9.5
    before = sum(1 for _, path in fake.requests if path == "/api/v1/nodes")
    built = state.builder.build(
        template_id=None,
        nodes=["chatOpenAI", "bufferMemory", "conversationChain"],
        name=None,
        model=None,
        temperature=None,
        memory_type=None,
    )
    assert sum(1 for _, path in fake.requests if path == "/api/v1/nodes") == before + 1
    assert state.catalog.state().nodes["chatOpenAI"]["version"] == 9.5
    assert '"version": 9.5' in fake.chatflows[built["chatflow_id"]]["flowData"]
