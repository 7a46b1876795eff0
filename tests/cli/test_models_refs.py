"""`agentloom models`: prepare tests the model named; set-default/enable/disable/remove/update take a key or an id."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cli_runner import agentloom
from tests.conftest import free_port


def models(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return agentloom(env, "models", *args)


@pytest.fixture
def env(server_env: dict[str, str]) -> dict[str, str]:
    dead = f"http://127.0.0.1:{free_port()}"
    assert (
        models(
            server_env,
            "add",
            "nomic-embed-text",
            "--provider",
            "ollama",
            "--kind",
            "ollama",
            "--base-url",
            dead,
            "--dimensions",
            "768",
        ).returncode
        == 0
    )
    assert (
        models(
            server_env,
            "add",
            "text-embedding-3-small",
            "--provider",
            "oai",
            "--kind",
            "openai",
            "--base-url",
            dead + "/v1",
            "--api-key-env",
            "AGENTLOOM_TEST_NO_KEY",
            "--dimensions",
            "1536",
        ).returncode
        == 0
    )
    return server_env


def test_prepare_tests_the_model_named_and_fails_with_the_reason(env: dict[str, str]) -> None:
    unreachable = models(env, "prepare", "nomic-embed-text")
    assert unreachable.returncode == 1 and "ready" not in unreachable.stdout + unreachable.stderr
    assert "embedding provider 'ollama' is unreachable" in unreachable.stderr
    no_key = models(env, "prepare", "text-embedding-3-small")
    assert no_key.returncode == 1 and "AGENTLOOM_TEST_NO_KEY is empty" in no_key.stderr
    unknown = models(env, "prepare", "no-such-model")
    assert unknown.returncode == 1 and "there is no model 'no-such-model'" in unknown.stderr


def test_records_are_named_by_key_or_id_with_a_human_line_or_json(env: dict[str, str]) -> None:
    done = models(env, "set-default", "nomic-embed-text")
    assert done.returncode == 0 and done.stdout == "the default model is now nomic-embed-text (id 2, provider ollama)\n"
    as_json = json.loads(models(env, "set-default", "1", "--json").stdout)
    assert as_json["model_key"] == "all-MiniLM-L6-v2" and as_json["is_default"] is True
    assert models(env, "disable", "text-embedding-3-small").stdout.startswith("disabled text-embedding-3-small (id 3")
    updated = models(env, "update", "nomic-embed-text", "--timeout", "5", "--json")
    assert json.loads(updated.stdout)["config"] == {"timeout": 5.0}
    assert models(env, "update", "nomic-embed-text").returncode == 2  # nothing to change
    assert models(env, "remove", "text-embedding-3-small").stdout == "removed model text-embedding-3-small (id 3)\n"
    missing = models(env, "enable", "text-embedding-3-small")
    assert missing.returncode == 1 and "there is no model 'text-embedding-3-small'" in missing.stderr
