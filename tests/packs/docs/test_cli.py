"""`agentic-knowledge init | refresh | status` through the real command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, TIMESTAMP
from tests.packs.docs.conftest import write_config
from tests.packs.docs.repos import Repo

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

CLI = str(Path(PYTHON).with_name("agentic-knowledge"))


def run(
    cwd: Path, *args: str, command: tuple[str, ...] = (CLI,), env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_init_refresh_status(tmp_path: Path) -> None:
    react = Repo(tmp_path / "react", {"README.md": "# React", "docs/hooks.md": "# Hooks", "src/index.js": "x"})
    vue = Repo(tmp_path / "vue", {"guide/intro.md": "# Vue"})
    project = tmp_path / "project"
    write_config(
        project,
        "docsets:\n"
        f"  - name: react\n    aliases: [reactjs]\n    web_sources:\n      - type: git_repo\n        url: {react.url}\n"
        f"  - name: vue\n    web_sources:\n      - type: git_repo\n        url: {vue.url}\n        paths: [guide]\n"
        "  - name: local\n    version: '1.0'\n",
    )
    (project / "sub").mkdir()

    init = run(project / "sub", "init", "reactjs")  # an alias, from a subfolder
    assert init.returncode == 0, init.stderr
    assert "react" in init.stdout and "2 files" in init.stdout
    react_dir = project / ".knowledge" / "docsets" / "react"
    assert sorted(p.name for p in react_dir.rglob("*.md")) == ["README.md", "hooks.md"]
    assert (project / ".knowledge" / ".gitignore").read_text() == "docsets/\n"

    status = json.loads(run(project, "status", "--json").stdout)
    by_name = {d["docset"]: d for d in status["docsets"]}
    assert by_name["react"]["sources"][0]["last_fetched"] and by_name["react"]["sources"][0]["files"] == 2
    assert by_name["vue"]["sources"][0]["last_fetched"] is None
    assert by_name["local"]["local_path"].endswith("/.knowledge/docs/local-1.0/") and not by_name["local"]["exists"]
    table = run(project, "status")
    assert table.returncode == 0 and "react" in table.stdout and "never" in table.stdout

    react.commit({"docs/effects.md": "# Effects"})
    refresh = run(project, "refresh")  # every docset with web sources
    assert refresh.returncode == 0, refresh.stderr
    assert (react_dir / "docs" / "effects.md").exists()
    assert (project / ".knowledge" / "docsets" / "vue" / "guide" / "intro.md").exists()
    assert "updated" in refresh.stdout

    again = run(project, "refresh", "vue")
    assert again.returncode == 0 and "unchanged" in again.stdout and "react" not in again.stdout

    local = run(project, "init", "local")
    assert local.returncode == 0 and (project / ".knowledge" / "docs" / "local-1.0").is_dir()

    via_agentloom = run(project, "docs", "status", "--json", command=(PYTHON, "-m", "agentloom"))
    assert json.loads(via_agentloom.stdout)["docsets"][0]["docset"] == "react"


def test_a_failing_source_is_reported_and_the_rest_continue(tmp_path: Path) -> None:
    good = Repo(tmp_path / "good", {"README.md": "ok"})
    project = tmp_path / "project"
    missing = (tmp_path / "missing.git").as_uri()
    write_config(
        project,
        "docsets:\n  - name: mixed\n    web_sources:\n"
        f"      - type: git_repo\n        url: {missing}\n"
        f"      - type: git_repo\n        url: {good.url}\n",
    )
    result = run(project, "refresh")
    assert result.returncode == 1
    assert "no repository at this URL" in result.stdout
    assert (project / ".knowledge" / "docsets" / "mixed" / "README.md").read_text() == "ok"
    status = json.loads(run(project, "status", "--json").stdout)["docsets"][0]["sources"]
    assert status[0]["error"] and status[1]["error"] is None


def test_wrong_arguments_and_configuration_exit_2(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    nothing = run(project, "status")
    assert nothing.returncode == 2 and "no .knowledge/config.yaml found" in nothing.stderr
    write_config(project, "docsets:\n  - name: react\n")
    unknown = run(project, "init", "angular")
    assert unknown.returncode == 2 and "Available docsets: react" in unknown.stderr
    invalid = run(project, "init", "../etc")
    assert invalid.returncode == 2 and "not a valid docset name" in invalid.stderr
    assert not (project / ".knowledge" / "etc").exists()
    local_refresh = run(project, "refresh", "react")
    assert local_refresh.returncode == 2 and "no web_sources" in local_refresh.stderr
    write_config(project, "docsets:\n  - name: react\n\tversion: x\n")
    broken = run(project, "status")
    assert broken.returncode == 2 and "line 3" in broken.stderr


def test_status_shows_times_in_the_one_format(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "guide", {"README.md": "# Guide"})
    project = tmp_path / "project"
    write_config(
        project, f"docsets:\n  - name: guide\n    web_sources:\n      - type: git_repo\n        url: {repo.url}\n"
    )
    assert run(project, "init", "guide").returncode == 0
    metadata_path = project / ".knowledge" / "docsets" / "guide" / ".agentic-metadata.json"
    metadata = json.loads(metadata_path.read_text())
    assert TIMESTAMP.fullmatch(metadata["updated_at"]) and TIMESTAMP.fullmatch(metadata["sources"][0]["last_fetched"])

    (source,) = json.loads(run(project, "status", "--json").stdout)["docsets"][0]["sources"]
    assert source["last_fetched"] == metadata["sources"][0]["last_fetched"]
    assert source["last_fetched"] in run(project, "status").stdout.replace("\n", "")  # the table, maybe wrapped

    # Metadata written before the one format (seconds, +00:00) is shown converted, and read as before.
    metadata["sources"][0]["last_fetched"] = "2024-03-01T12:00:00+00:00"
    metadata_path.write_text(json.dumps(metadata))
    (source,) = json.loads(run(project, "status", "--json").stdout)["docsets"][0]["sources"]
    assert source["last_fetched"] == "2024-03-01T12:00:00.000Z" and source["files"] == 1


def test_an_unknown_command_suggests_the_nearest(tmp_path: Path) -> None:
    listed = run(tmp_path, "list")
    assert listed.returncode == 2
    assert "No such command 'list'. Did you mean 'status'?" in listed.stderr
    unknown = run(tmp_path, "frobnicate")
    assert unknown.returncode == 2
    assert "No such command 'frobnicate'. The commands are init, new, refresh, status." in unknown.stderr


def test_the_project_folder_is_taken_from_the_docs_settings_as_the_server_takes_it(tmp_path: Path) -> None:
    project, elsewhere, other = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "other"
    config = write_config(project, "docsets:\n  - name: mine\n")
    write_config(other, "docsets:\n  - name: theirs\n")
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env["AGENTLOOM_DOCS__PROJECT_DIR"] = str(project)  # what an MCP client's `env` sets for the server

    status = run(elsewhere, "status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["config"] == config.as_posix()
    via_agentloom = run(elsewhere, "docs", "status", "--json", command=(PYTHON, "-m", "agentloom"), env=env)
    assert json.loads(via_agentloom.stdout)["config"] == config.as_posix()
    flag = run(elsewhere, "status", "--json", "-C", str(other), env=env)  # the flag wins
    assert json.loads(flag.stdout)["docsets"][0]["docset"] == "theirs"

    del env["AGENTLOOM_DOCS__PROJECT_DIR"]
    env["AGENTLOOM_DOCS__CONFIG_FILE"] = str(other / ".knowledge" / "config.yaml")
    named = run(elsewhere, "status", "--json", env=env)
    assert json.loads(named.stdout)["docsets"][0]["docset"] == "theirs"

    env["AGENTLOOM_DOCS__PROJECT_DIR"] = str(tmp_path / "missing")
    del env["AGENTLOOM_DOCS__CONFIG_FILE"]
    new = run(elsewhere, "new", env=env)
    assert new.returncode == 2
    assert f"AGENTLOOM_DOCS__PROJECT_DIR: {tmp_path / 'missing'} is not a folder" in new.stderr
