"""Error messages are for the person who sees them.

A bad setting names what the user wrote (the environment variable, the TOML key, the
command-line flag), the problem and the fix, in one or two lines, exit code 2. Every
registry error carries its field and reason, and the command line turns it into its own
terms. Nothing names a Python function, a keyword argument or pydantic.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from agentloom.core.errors import ConfigError, NotFoundError
from agentloom.embeddings import ModelRegistry
from agentloom.embeddings.records import (
    PROVIDER_KINDS,
    InvalidFieldError,
    RecordNotFoundError,
    RefusedError,
    RegistryError,
)
from agentloom.terminal.common import load_settings
from tests.conftest import PYTHON

CODE = re.compile(r"\(\)|=True|=False|pydantic|errors\.pydantic\.dev|Traceback|Input should be|\[type=")


def agentloom(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "agentloom", *args],
        env={**env, "COLUMNS": "250"},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def problems(stderr: str) -> list[str]:
    """The reported problems; each is an `error:` line, optionally followed by one `  fix:` line."""
    lines = stderr.strip().splitlines()
    for i, line in enumerate(lines):
        assert line.startswith("error: ") or (line.startswith("  fix: ") and lines[i - 1].startswith("error: ")), stderr
    return [line for line in lines if line.startswith("error: ")]


# -- settings, through the real command ---------------------------------------------------------
@pytest.mark.slow
def test_bad_environment_variables_are_named_with_the_fix(server_env: dict[str, str]) -> None:
    server_env.update(AGENTLOOM_PORT="abc", AGENTLOOM_LOG_LEVEL="LOUD", AGENTLOOM_BREAKERS__FAILURE_THRESHOLD="0")
    for command in (("models", "list"), ("doctor",)):
        result = agentloom(server_env, *command)
        assert result.returncode == 2, result.stdout + result.stderr
        assert not CODE.search(result.stderr), result.stderr
        errors = problems(result.stderr)
        assert len(errors) == 3 and len(result.stderr.strip().splitlines()) == 6, result.stderr
        text = result.stderr
        assert "AGENTLOOM_PORT='abc'" in text and "port must be a whole number from 1 to 65535" in text
        assert "AGENTLOOM_LOG_LEVEL='LOUD'" in text and "one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in text
        assert "AGENTLOOM_BREAKERS__FAILURE_THRESHOLD='0'" in text and "at least 1" in text
        assert "unset it to use the default" in text and "AGENTLOOM_PORT=8765" in text


@pytest.mark.slow
def test_bad_toml_values_name_the_key_and_file(server_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "agentloom.toml").write_text('log_level = "LOUD"\n\n[breakers]\nfailure_threshold = 0\n')
    result = agentloom(server_env, "models", "list", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert not CODE.search(result.stderr), result.stderr
    assert len(problems(result.stderr)) == 2
    assert 'agentloom.toml: log_level = "LOUD" is not valid' in result.stderr
    assert "failure_threshold in the [breakers] table of agentloom.toml" in result.stderr
    assert "failure_threshold = 3" in result.stderr


@pytest.mark.slow
def test_a_bad_flag_is_named_as_the_flag(server_env: dict[str, str]) -> None:
    result = agentloom(server_env, "serve", "--port", "0")
    assert result.returncode == 2, result.stdout + result.stderr
    assert not CODE.search(result.stderr), result.stderr
    assert "--port 0 is not valid: port must be a whole number from 1 to 65535" in result.stderr
    assert "--port 8765" in result.stderr


# -- settings, in process (each source and shape) -----------------------------------------------
@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.upper().startswith("AGENTLOOM_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTLOOM_DATA_DIR", str(tmp_path / "data"))
    return monkeypatch


def settings_error(capsys: pytest.CaptureFixture[str], **overrides: Any) -> str:
    with pytest.raises(typer.Exit) as exc:
        load_settings(**overrides)
    assert exc.value.exit_code == 2
    err = capsys.readouterr().err
    assert not CODE.search(err), err
    problems(err)
    return err


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AGENTLOOM_PORT": "70000"}, ["AGENTLOOM_PORT='70000'", "from 1 to 65535", "AGENTLOOM_PORT=8765"]),
        ({"agentloom_port": "x"}, ["agentloom_port='x'"]),  # named as written (variables are case-insensitive)
        ({"AGENTLOOM_EMBEDDINGS__BATCH_SIZE": "0"}, ["AGENTLOOM_EMBEDDINGS__BATCH_SIZE='0'", "at least 1"]),
        ({"AGENTLOOM_BREAKERS__RESET_TIMEOUT_SECONDS": "-1"}, ["a number above 0"]),
        ({"AGENTLOOM_EMBEDDINGS__MAX_TOKENS": "9999"}, ["from 8 to 512"]),
        (
            {"AGENTLOOM_BREAKERS": "not json"},
            ["AGENTLOOM_BREAKERS is not valid JSON", "AGENTLOOM_BREAKERS__FAILURE_THRESHOLD"],
        ),
        (
            {"AGENTLOOM_BREAKERS": '{"failure_threshold": 0}'},
            ["AGENTLOOM_BREAKERS sets breakers.failure_threshold to 0", "AGENTLOOM_BREAKERS__FAILURE_THRESHOLD"],
        ),
        ({"AGENTLOOM_CONFIG_FILE": "missing.toml"}, ["AGENTLOOM_CONFIG_FILE=missing.toml: no such file"]),
    ],
)
def test_environment_errors(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str], expected: list[str]
) -> None:
    for key, value in env.items():
        clean_env.setenv(key, value)
    err = settings_error(capsys)
    for text in expected:
        assert text in err, (text, err)


def test_toml_errors(clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "custom.toml").write_text('port = "eighty"\n[embeddings]\nbatch_size = 0\n')
    clean_env.setenv("AGENTLOOM_CONFIG_FILE", "custom.toml")
    err = settings_error(capsys)
    assert 'custom.toml: port = "eighty" is not valid' in err and "port = 8765" in err
    assert "batch_size in the [embeddings] table of custom.toml" in err
    # the environment wins over the file, and is what gets named
    clean_env.setenv("AGENTLOOM_PORT", "eighty")
    assert "AGENTLOOM_PORT='eighty'" in settings_error(capsys)

    (tmp_path / "custom.toml").write_text("port = \n")
    err = settings_error(capsys)
    assert "custom.toml is not valid TOML" in err and "line 1" in err


def test_flag_errors_name_the_flag(clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.setenv("AGENTLOOM_PORT", "9000")  # valid, and overridden by the flag
    err = settings_error(capsys, port=-1)
    assert "--port -1 is not valid" in err and "AGENTLOOM_PORT" not in err


def test_valid_settings_pass(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGENTLOOM_BREAKERS__FAILURE_THRESHOLD", "5")
    assert load_settings(port=None).breakers.failure_threshold == 5


# -- the registry's errors: typed, with the field; the CLI's translation -------------------------
def registry_failures(registry: ModelRegistry) -> list[tuple[Callable[[], object], dict[str, Any]]]:
    """Every way the registry refuses a call, with the command-line context that would cause it."""
    cli = {"provider": "p"}
    return [
        (lambda: registry.upsert_provider("bad name", "ollama"), {"provider": "bad name"}),
        (lambda: registry.upsert_provider("p", "azure"), cli),
        (lambda: registry.upsert_provider("p", "openai"), cli),
        (lambda: registry.upsert_provider("p", "openai", base_url="ftp://x"), cli),
        (lambda: registry.upsert_provider("p", "local", base_url="http://x"), cli),
        (lambda: registry.upsert_provider("p", "openai", base_url="https://x", api_key=" "), cli),
        (lambda: registry.upsert_provider("p", "openai", base_url="https://x", api_key_env="sk-1"), cli),
        (lambda: registry.upsert_provider("p", "local", api_key_env="KEY"), cli),
        (lambda: registry.upsert_provider("p", "local", api_key="secret"), cli),
        (lambda: registry.upsert_provider("local", "ollama"), {"provider": "local"}),
        (lambda: registry.add_model("m", "nowhere", dimensions=3), {"provider": "nowhere"}),
        (lambda: registry.add_model("all-MiniLM-L6-v2", "local", dimensions=384), {"provider": "local"}),
        (lambda: registry.add_model(" ", "local", dimensions=3), {"provider": "local"}),
        (lambda: registry.add_model(" m", "local", dimensions=3), {"provider": "local"}),
        (lambda: registry.add_model("m", "local", dimensions=0), {"provider": "local"}),
        (lambda: registry.add_model("m", "local", dimensions=-2), {"provider": "local"}),
        (lambda: registry.add_model("m", "local", dimensions=3, model_type="Bad Type"), {"provider": "local"}),
        (lambda: registry.add_model("m", "local", dimensions=3, is_default=True, enabled=False), {}),
        (lambda: registry.add_model("m", "local", dimensions=3, config=[1]), {}),  # type: ignore[arg-type]  # a wrong type on purpose: the message under test
        (lambda: registry.add_model("m", "local", dimensions=3, config={"timeout": 5}), {"provider": "local"}),
        (lambda: registry.add_model("m", "ol", dimensions=3, config={"model_path": "/x"}), {"provider": "ol"}),
        (lambda: registry.add_model("m", "local", dimensions=3, config={"model_path": ""}), {"provider": "local"}),
        (lambda: registry.add_model("m", "local", dimensions=3, config={"max_tokens": 1}), {"provider": "local"}),
        (lambda: registry.add_model("m", "ol", dimensions=3, config={"timeout": 0}), {"provider": "ol"}),
        (lambda: registry.add_model("m", "ol", dimensions=3, config={"timeout": 10000}), {"provider": "ol"}),
        (lambda: registry.add_model("m", "ol", dimensions=3, config={"api_endpoint": "x"}), {"provider": "ol"}),
        (lambda: registry.add_model("m", "ol", dimensions=3, config={"send_dimensions": "y"}), {"provider": "ol"}),
        (lambda: registry.update_model(999, enabled=True), {"model_id": 999}),
        (lambda: registry.update_model(1, enabled=False), {"model_id": 1}),
        (lambda: registry.update_model(1, is_default=False), {"model_id": 1}),
        (lambda: registry.update_model(2, is_default=True), {"model_id": 2}),
        (lambda: registry.update_model(1, dimensions=0), {"model_id": 1}),
        (lambda: registry.remove_model(999), {"model_id": 999}),
        (lambda: registry.remove_model(1), {"model_id": 1}),
        (lambda: registry.get("shared"), {"model_key": "shared"}),
    ]


@pytest.fixture
def registry(tmp_path: Path) -> ModelRegistry:
    registry = ModelRegistry(tmp_path / "models.db")
    registry.ensure_default()  # id 1, the default
    registry.upsert_provider("ol", "ollama")
    registry.add_model("disabled", "ol", dimensions=8, enabled=False)  # id 2
    registry.add_model("shared", "ol", dimensions=8)
    registry.upsert_provider("ol2", "ollama", base_url="http://10.0.0.2:11434")
    registry.add_model("shared", "ol2", dimensions=8)
    return registry


def test_every_registry_refusal_is_typed_and_translated(registry: ModelRegistry) -> None:
    from agentloom.cli.model_errors import explain as _explain

    failures = registry_failures(registry)
    for call, ctx in failures:
        with pytest.raises(RegistryError) as caught:
            call()
        exc = caught.value
        # still what Python callers (and the MCP server) catch
        assert isinstance(exc, ConfigError | NotFoundError)
        assert isinstance(exc, InvalidFieldError | RefusedError | RecordNotFoundError)
        assert exc.reason and (exc.field or exc.reason == "ambiguous")
        # the Python message names the argument, never a call with `()` or `name=True`
        assert not re.search(r"\(\)|=True|=False", str(exc)), str(exc)
        message, fix, code = _explain(exc, ctx)
        text = f"{message} {fix or ''}"
        assert code == (2 if isinstance(exc, InvalidFieldError) else 1), (text, code)
        assert not CODE.search(text), text
        assert not re.search(
            r"\b(is_default|model_key|base_url|api_key_env|upsert_provider|"
            r"update_model|add_model|remove_model)\b",
            text,
        ), text
    assert registry.list_models()[0].is_default  # nothing changed


def test_cli_kinds_match_the_registry() -> None:
    from agentloom.cli.models import PROVIDER_KINDS as CLI_KINDS

    assert CLI_KINDS == PROVIDER_KINDS
