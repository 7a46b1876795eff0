"""``agentloom models ...`` errors as a user sees them: stderr and exit code (tests/cli_runner.py).

Every refusal speaks in command-line terms (``--dimensions``, ``ID``, ``agentloom models
list``) and says how to fix it; none names a Python function or keyword argument. Exit
codes: 2 for a wrong argument, 1 for a refused operation or a missing thing.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli_runner import agentloom

# What must never reach the person at the terminal: Python calls, keyword arguments, the
# registry's argument names, pydantic's dumps, tracebacks.
CODE = re.compile(
    r"\(\)|=True|=False|pydantic|errors\.pydantic\.dev|Traceback|upsert_provider|update_model|add_model"
    r"|remove_model|is_default|model_key|base_url|api_key_env|model_path|config\.|ModelRegistry|Error:"
)


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return agentloom(env, "models", *args)


def run_all(env: dict[str, str], *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Several independent commands, one after the other."""
    return [run(env, *args) for args in commands]


def assert_user_terms(result: subprocess.CompletedProcess[str]) -> None:
    assert result.stderr.strip(), "an error must be explained"
    assert not CODE.search(result.stderr), result.stderr
    assert "error:" in result.stderr or "Invalid value" in result.stderr, result.stderr


def refused(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert_user_terms(result)
    for text in expected:
        assert text in result.stderr, (text, result.stderr)


def bad_argument(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert_user_terms(result)
    for text in expected:
        assert text in result.stderr, (text, result.stderr)


def models(env: dict[str, str]) -> dict[str, dict[str, object]]:
    listed = run(env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {m["model_key"]: m for m in json.loads(listed.stdout)}


@pytest.fixture
def env(server_env: dict[str, str]) -> dict[str, str]:
    """A registry with the local default (id 1) and a disabled ollama model (id 2, provider 'ol')."""
    added = run(
        server_env,
        "add",
        "nomic-embed-text",
        "--provider",
        "ol",
        "--kind",
        "ollama",
        "--base-url",
        "http://127.0.0.1:11434",
        "--dimensions",
        "768",
    )
    assert added.returncode == 0, added.stderr
    assert "added model nomic-embed-text (id 2)" in added.stdout
    disabled = run(server_env, "disable", "2")
    assert disabled.returncode == 0, disabled.stderr
    return server_env


def test_unknown_and_malformed_model_ids(env: dict[str, str]) -> None:
    results = run_all(
        env,
        ("set-default", "999"),
        ("enable", "999"),
        ("disable", "999"),
        ("remove", "999"),
        ("remove", "abc"),
        ("set-default", "0"),
    )
    for result in results[:4]:
        refused(result, "no model with id 999", "agentloom models list")
    refused(results[4], "there is no model 'abc'", "agentloom models list")  # a key, as `prepare` takes
    bad_argument(results[5], "0 is not a model id")


def test_the_default_can_be_neither_removed_nor_disabled(env: dict[str, str]) -> None:
    remove, disable, make_default = run_all(env, ("remove", "1"), ("disable", "1"), ("set-default", "2"))
    refused(
        remove,
        "'all-MiniLM-L6-v2' (id 1) is the default model and cannot be removed",
        "agentloom models set-default ID",
    )
    refused(disable, "(id 1) is the default model and cannot be disabled", "agentloom models set-default ID")
    # a disabled model cannot become the default: the fix is the exact commands
    refused(
        make_default,
        "'nomic-embed-text' (id 2) is disabled",
        "agentloom models enable 2",
        "agentloom models set-default 2",
    )
    by_key = models(env)
    assert by_key["all-MiniLM-L6-v2"]["is_default"] and by_key["all-MiniLM-L6-v2"]["enabled"]
    assert not by_key["nomic-embed-text"]["is_default"]


def test_duplicate_model_key_is_refused_before_the_provider_changes(env: dict[str, str], tmp_path: Path) -> None:
    from agentloom.embeddings import ModelRegistry

    registry = ModelRegistry(tmp_path / "data" / "models.db")
    before = registry.get_provider("ol")
    local, ollama = run_all(
        env,
        ("add", "all-MiniLM-L6-v2", "--provider", "local", "--dimensions", "384"),
        (
            "add",
            "nomic-embed-text",
            "--provider",
            "ol",
            "--kind",
            "ollama",
            "--base-url",
            "http://10.9.9.9:1",
            "--dimensions",
            "768",
        ),
    )
    refused(local, "model 'all-MiniLM-L6-v2' already exists for provider 'local' (id 1)", "agentloom models remove 1")
    refused(ollama, "already exists for provider 'ol' (id 2)", "agentloom models set-default 2")
    assert registry.get_provider("ol") == before  # the refused add left the provider alone


def test_unknown_provider_without_kind(env: dict[str, str]) -> None:
    result = run(env, "add", "m", "--provider", "nowhere", "--dimensions", "3")
    refused(
        result,
        "there is no provider 'nowhere'",
        "known providers: local, ol",
        "--kind local|openai|ollama",
        "--base-url",
    )


def test_invalid_kind_and_dimensions(env: dict[str, str]) -> None:
    kind, zero, negative, huge, text = run_all(
        env,
        ("add", "m", "--provider", "p", "--kind", "azure", "--dimensions", "3"),
        ("add", "m", "--provider", "local", "--dimensions", "0"),
        ("add", "m", "--provider", "nowhere", "--kind", "ollama", "--dimensions", "-3"),
        ("add", "m", "--provider", "local", "--dimensions", "20000"),
        ("add", "m", "--provider", "local", "--dimensions", "many"),
    )
    bad_argument(kind, "'--kind'", "'azure' is not a provider kind", "local, openai, ollama")
    bad_argument(zero, "--dimensions 0 is invalid", "from 1 to 16384", "--dimensions 384")
    bad_argument(negative, "--dimensions -3 is invalid", "from 1 to 16384")
    bad_argument(huge, "--dimensions 20000 is invalid")
    bad_argument(text, "'--dimensions'", "'many' is not a whole number")
    assert "m" not in models(env)  # nothing written
    from agentloom.embeddings import ModelRegistry

    registry = ModelRegistry(Path(env["AGENTLOOM_DATA_DIR"]) / "models.db")
    assert registry.get_provider("nowhere") is None  # bad --dimensions: the provider was not created either


def test_bad_provider_settings(env: dict[str, str]) -> None:
    scheme, missing, key, local_url, local_key, name = run_all(
        env,
        ("add", "m", "--provider", "api", "--kind", "openai", "--base-url", "ftp://example.com", "--dimensions", "8"),
        ("add", "m", "--provider", "api", "--kind", "openai", "--dimensions", "8"),
        (
            "add",
            "m",
            "--provider",
            "api",
            "--kind",
            "openai",
            "--base-url",
            "https://a.example/v1",
            "--api-key-env",
            "sk-123",
            "--dimensions",
            "8",
        ),
        ("add", "m", "--provider", "local", "--kind", "local", "--base-url", "http://a.example", "--dimensions", "8"),
        ("add", "m", "--provider", "local", "--kind", "local", "--api-key-env", "KEY", "--dimensions", "8"),
        ("add", "m", "--provider", "bad name", "--kind", "ollama", "--dimensions", "8"),
    )
    bad_argument(
        scheme,
        "--base-url 'ftp://example.com' is not an http:// or https:// URL",
        "--base-url https://api.openai.com/v1",
    )
    bad_argument(missing, "--base-url is required for an openai provider")
    bad_argument(key, "--api-key-env 'sk-123' is not the name of an environment variable", "NAME")
    bad_argument(local_url, "--base-url does not apply to a local provider", "leave --base-url out")
    bad_argument(local_key, "--api-key-env does not apply to a local provider")
    bad_argument(name, "--provider 'bad name' is not a valid provider name")
    assert "m" not in models(env)


def test_options_that_do_not_fit_the_provider(env: dict[str, str]) -> None:
    timeout_local, path_remote, zero, millis, ignored = run_all(
        env,
        ("add", "m", "--provider", "local", "--dimensions", "384", "--timeout", "5"),
        ("add", "m", "--provider", "ol", "--dimensions", "8", "--model-path", "/models/m"),
        ("add", "m", "--provider", "ol", "--dimensions", "8", "--timeout", "0"),
        ("add", "m", "--provider", "ol", "--dimensions", "8", "--timeout", "10000"),
        ("add", "m", "--provider", "ol", "--dimensions", "8", "--base-url", "http://10.0.0.1:11434"),
    )
    bad_argument(timeout_local, "--timeout applies only to models served over HTTP", "provider 'local'")
    bad_argument(path_remote, "--model-path applies only to local models", "provider 'ol' is an ollama provider")
    bad_argument(zero, "--timeout 0 is invalid", "seconds")
    bad_argument(millis, "--timeout 10000 is invalid", "did you mean --timeout 10")
    bad_argument(ignored, "--base-url is only used together with --kind", "add --kind ollama")
    assert "m" not in models(env)


def test_a_used_provider_keeps_its_kind(env: dict[str, str]) -> None:
    result = run(env, "add", "m", "--provider", "local", "--kind", "ollama", "--dimensions", "8")
    refused(result, "provider 'local' is a local provider with 1 model(s)", "another --provider name")


def test_prepare_names_an_unknown_or_disabled_model(env: dict[str, str]) -> None:
    unknown, disabled = run_all(env, ("prepare", "nope"), ("prepare", "nomic-embed-text"))
    refused(unknown, "no model 'nope'", "agentloom models list", "agentloom models add nope")
    refused(disabled, "(id 2) is disabled", "agentloom models enable 2")


def test_valid_commands_still_work(env: dict[str, str]) -> None:
    assert run(env, "enable", "2").returncode == 0
    switched = run(env, "set-default", "2", "--json")
    assert switched.returncode == 0, switched.stderr
    assert json.loads(switched.stdout)["is_default"] is True
    added = run(env, "add", "second", "--provider", "ol", "--dimensions", "768", "--timeout", "30")
    assert added.returncode == 0, added.stderr
    assert run(env, "remove", "1").returncode == 0  # the old default, no longer the default
    by_key = models(env)
    assert set(by_key) == {"nomic-embed-text", "second"}
    assert by_key["second"]["config"] == {"timeout": 30.0}
