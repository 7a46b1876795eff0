"""`agentloom flowise ...` as a user sees it (tests/cli_runner.py), against a fake Flowise."""

from __future__ import annotations

import json

import pytest

from tests.cli_runner import agentloom
from tests.conftest import free_port
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.test_catalog import trim


@pytest.mark.slow
def test_refresh_status_search(fake_flowise: FakeFlowise, server_env: dict[str, str]) -> None:
    trim(fake_flowise)
    server_env.update(AGENTLOOM_FLOWISE__URL=fake_flowise.url, AGENTLOOM_FLOWISE__API_KEY=fake_flowise.api_key)
    status = agentloom(server_env, "flowise", "status")
    assert status.returncode == 0 and "never refreshed" in status.stdout and "API key set" in status.stdout
    refreshed = agentloom(server_env, "flowise", "refresh", "--json")
    assert refreshed.returncode == 0, refreshed.stderr
    assert json.loads(refreshed.stdout)["new"] == len(fake_flowise.nodes)
    fresh = agentloom(server_env, "flowise", "refresh")
    assert fresh.returncode == 0 and "catalog is fresh" in fresh.stdout
    found = agentloom(server_env, "flowise", "search", "remember the chat history", "--category", "Memory")
    assert found.returncode == 0 and "[Memory]" in found.stdout.splitlines()[0]
    templates = agentloom(server_env, "flowise", "search", "a simple conversation bot", "--templates", "--json")
    assert "conversation-chain" in [t["template_id"] for t in json.loads(templates.stdout)]
    bad = agentloom(server_env, "flowise", "search", "x", "--category", "Robots")
    assert bad.returncode == 1 and "category 'Robots' unknown" in bad.stderr


def test_unreachable_server_is_named(server_env: dict[str, str]) -> None:
    server_env["AGENTLOOM_FLOWISE__URL"] = f"http://127.0.0.1:{free_port()}"
    result = agentloom(server_env, "flowise", "refresh")
    assert result.returncode == 1
    assert "unreachable" in result.stderr and "AGENTLOOM_FLOWISE__URL" in result.stderr
    bad = agentloom(server_env, "flowise", "status")
    assert bad.returncode == 0
    wrong = agentloom({**server_env, "AGENTLOOM_FLOWISE__URL": "localhost:3000"}, "flowise", "status")
    assert wrong.returncode == 2 and "http://host:port" in wrong.stderr


def test_a_search_that_finds_nothing_says_so(fake_flowise: FakeFlowise, server_env: dict[str, str]) -> None:
    trim(fake_flowise)
    server_env.update(
        AGENTLOOM_FLOWISE__URL=fake_flowise.url,
        AGENTLOOM_FLOWISE__API_KEY=fake_flowise.api_key,
        AGENTLOOM_FLOWISE__MIN_SCORE="0.99",  # nothing means this much: only word matches could answer
    )
    assert agentloom(server_env, "flowise", "refresh").returncode == 0
    for args, what in ((("--templates",), "templates"), ((), "nodes")):
        none = agentloom(server_env, "flowise", "search", "zebra migration patterns", *args)
        assert none.returncode == 0 and none.stdout == "", none.stdout
        assert f"no {what} match 'zebra migration patterns'" in none.stderr, none.stderr
        listed = agentloom(server_env, "flowise", "search", "zebra migration patterns", "--json", *args)
        assert listed.returncode == 0 and json.loads(listed.stdout) == []
