"""The agentloom command, run as a user runs it: a real process, real exit codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, free_port
from tests.server.testpacks import install_testpacks

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def agentloom(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**env, "COLUMNS": "250"}  # rich tables wrap at the terminal width
    return subprocess.run(
        [PYTHON, "-m", "agentloom", *args], env=env, capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_doctor_passes_with_healthy_packs(server_env: dict[str, str]) -> None:
    flowise = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    server_env["AGENTLOOM_FLOWISE__URL"] = flowise
    result = agentloom(server_env, "doctor", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    # Healthy, but without a .knowledge/config.yaml the docs pack is degraded (optional), not fine;
    # so is the flowise pack without a Flowise server (its searches answer from the cached catalog).
    assert report["status"] == "degraded"
    assert [name for name, c in checks.items() if not c["ok"]] == ["docs configuration", f"Flowise ({flowise})"]
    assert checks["docs configuration"]["required"] is False
    assert checks[f"Flowise ({flowise})"]["required"] is False
    assert "unreachable" in checks[f"Flowise ({flowise})"]["detail"]
    assert checks["embedding model all-MiniLM-L6-v2"]["ok"] is True
    assert checks["import onnxruntime"]["ok"] is True


def test_doctor_fails_when_a_pack_is_broken(server_env: dict[str, str], tmp_path: Path) -> None:
    server_env["PYTHONPATH"] = str(install_testpacks(tmp_path / "site"))
    result = agentloom(server_env, "doctor")
    assert result.returncode == 1
    assert "database at 127.0.0.1:1 unreachable" in result.stdout
    assert agentloom(server_env, "doctor", "--packs", "echo").returncode == 0


def test_doctor_fails_when_the_data_directory_is_not_writable(server_env: dict[str, str], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = agentloom(server_env, "doctor", "--json", "--data-dir", str(blocker / "data"))
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["data directory writable"]["ok"] is False
    assert "AGENTLOOM_DATA_DIR" in checks["data directory writable"]["detail"]


def test_doctor_says_which_data_directory_is_used_and_why(server_env: dict[str, str], tmp_path: Path) -> None:
    del server_env["AGENTLOOM_DATA_DIR"]
    server_env["XDG_DATA_HOME"] = str(tmp_path / "user-data")
    project = tmp_path / "project"
    project.mkdir()

    def data_dir_check(*args: str) -> str:
        result = agentloom(server_env, "doctor", "--json", "--packs", "core", *args, cwd=project)
        assert result.returncode == 0, result.stdout + result.stderr
        checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
        return str(checks["data directory writable"]["detail"])

    # Started where a desktop client starts it (no .agentloom there): the user data directory, not ./.agentloom.
    detail = data_dir_check()
    assert detail.startswith(f"{tmp_path / 'user-data' / 'agentloom'} (the user data directory")
    assert not (project / ".agentloom").exists()
    (project / ".agentloom").mkdir()
    detail = data_dir_check()
    assert detail == f"{project / '.agentloom'} (the project's .agentloom, found in the working directory)"
    assert data_dir_check("--data-dir", str(tmp_path / "flag")).endswith("(set by --data-dir)")
    server_env["AGENTLOOM_DATA_DIR"] = str(tmp_path / "env")
    assert data_dir_check() == f"{tmp_path / 'env'} (set by AGENTLOOM_DATA_DIR)"


def test_packs_lists_loaded_and_skipped(server_env: dict[str, str], tmp_path: Path) -> None:
    server_env["PYTHONPATH"] = str(install_testpacks(tmp_path / "site"))
    result = agentloom(server_env, "packs")
    assert result.returncode == 0
    assert "echo, echo_forget" in result.stdout
    assert "missing dependency agentloom_no_such_lib" in result.stdout


def test_models_add_switch_and_keep_the_old_default(server_env: dict[str, str]) -> None:
    added = agentloom(
        server_env,
        "models",
        "add",
        "nomic-embed-text",
        "--provider",
        "ollama",
        "--kind",
        "ollama",
        "--base-url",
        "http://127.0.0.1:11434",
        "--dimensions",
        "768",
    )
    assert added.returncode == 0, added.stderr
    models = json.loads(agentloom(server_env, "models", "list", "--json").stdout)
    by_key = {m["model_key"]: m for m in models}
    assert by_key["all-MiniLM-L6-v2"]["is_default"] and not by_key["nomic-embed-text"]["is_default"]
    switched = agentloom(server_env, "models", "set-default", str(by_key["nomic-embed-text"]["id"]))
    assert switched.returncode == 0, switched.stderr
    models = {m["model_key"]: m for m in json.loads(agentloom(server_env, "models", "list", "--json").stdout)}
    assert models["nomic-embed-text"]["is_default"] and not models["all-MiniLM-L6-v2"]["is_default"]


def test_models_errors_are_clear(server_env: dict[str, str]) -> None:
    result = agentloom(server_env, "models", "set-default", "999")
    assert result.returncode == 1
    assert "999" in result.stderr and "models list" in result.stderr
    result = agentloom(server_env, "models", "add", "x", "--provider", "nowhere", "--dimensions", "3")
    assert result.returncode == 1 and "nowhere" in result.stderr


def test_invalid_configuration_is_reported_without_a_traceback(server_env: dict[str, str]) -> None:
    server_env["AGENTLOOM_PORT"] = "not-a-port"
    result = agentloom(server_env, "serve")
    assert result.returncode == 2
    assert "port" in result.stderr and "Traceback" not in result.stderr


def test_version(server_env: dict[str, str]) -> None:
    from agentloom import __version__

    result = agentloom(server_env, "--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"agentloom {__version__}\n", "")


def test_an_unknown_command_suggests_the_nearest(server_env: dict[str, str]) -> None:
    listed = agentloom(server_env, "list")
    assert listed.returncode == 2 and "No such command 'list'. Did you mean 'packs'?" in listed.stderr
    version = agentloom(server_env, "version")
    assert "No such command 'version'. Did you mean '--version'?" in version.stderr
    removed = agentloom(server_env, "models", "rm", "1")
    assert removed.returncode == 2 and "No such command 'rm'. Did you mean 'remove'?" in removed.stderr
    unknown = agentloom(server_env, "frobnicate")
    assert unknown.returncode == 2 and "No such command 'frobnicate'. The commands are " in unknown.stderr
    assert "doctor, " in unknown.stderr and "serve" in unknown.stderr
