"""`agentic-knowledge new` (and `init` without a docset in a new project): the commented starter config."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from mcp.client import Client
from typer.testing import CliRunner

from agentloom.packs.docs.cli import app
from agentloom.packs.docs.config import load_project
from tests.conftest import PYTHON
from tests.packs.docs.conftest import docs_host, write_config

runner = CliRunner()
CLI = str(Path(PYTHON).with_name("agentic-knowledge"))


def config_of(root: Path) -> Path:
    return root / ".knowledge" / "config.yaml"


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


def uncommented(starter: str) -> str:
    """The starter with every commented-out setting switched on: the top-level ones, the optional
    fields of the first docset, and each example docset (its prose comments stay comments)."""
    lines = []
    for line in starter.splitlines():
        line = re.sub(r"^# ((?:docs_root|template):)", r"\1", line)
        line = re.sub(r"^    # ((?:version|aliases):)", r"    \1", line)
        line = re.sub(r"^  # (?=[ -])", "  ", line)  # "  # - name: ..." and "  #   key: ..." lines
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_new_writes_a_starter_that_works_as_written(project: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "guide.md").write_text("# Guide\n")
    result = runner.invoke(app, ["new", "--project-dir", str(project)])
    assert result.exit_code == 0, result.output
    path = config_of(project)
    assert f"wrote {path}" in result.output
    for step in (
        f"agentic-knowledge status -C {project}",
        f"agentic-knowledge init NAME -C {project}",
        f"edit {path}",
        "agentic-knowledge-mcp",
    ):
        assert step in result.output

    loaded = load_project(path)
    assert [d.as_dict() for d in loaded.docsets] == [
        {
            "name": "project",
            "version": None,
            "aliases": [],
            "local_path": f"{project.as_posix()}/docs/",
            "description": f"The documentation of {project.name}",
            "web_sources": [],
        }
    ]


def test_without_a_docs_folder_the_docset_is_the_project_folder(project: Path) -> None:
    (project / "README.md").write_text("# Hello\n")
    assert runner.invoke(app, ["new", "-C", str(project)]).exit_code == 0
    (docset,) = load_project(config_of(project)).docsets
    assert docset.local_path == f"{project.as_posix()}/"


def test_every_commented_example_is_valid_once_uncommented(project: Path) -> None:
    assert runner.invoke(app, ["new", "-C", str(project)]).exit_code == 0
    starter = config_of(project).read_text(encoding="utf-8")
    assert starter.count("\n  # - name: ") == 3  # the examples are there, commented out

    loaded = load_project(config_of(project), uncommented(starter))
    by_name = {d.name: d for d in loaded.docsets}
    assert list(by_name) == ["project", "fastapi", "handbook", "react"]
    assert by_name["project"].version == "1.0" and by_name["project"].aliases == ("docs",)
    fastapi = by_name["fastapi"]
    assert fastapi.path == project / ".knowledge" / "docsets" / "fastapi"  # web sources, no local_path
    (source,) = fastapi.web_sources
    assert (source.url, source.branch, source.paths) == (
        "https://github.com/fastapi/fastapi.git",
        "master",
        ("docs/en/docs",),
    )
    handbook = by_name["handbook"]
    assert handbook.path == project / "vendor" / "handbook" and not handbook.allow_outside_project
    assert handbook.web_sources[0].branch == "main" and handbook.web_sources[0].paths == ("handbook", "README.md")
    assert handbook.template.startswith("Read {local_path}README.md first")
    assert by_name["react"].path == project / ".knowledge" / "docs" / "react-18.2"
    assert loaded.docs_root == project / ".knowledge" / "docs"
    # Every field a docset or a source can have is shown (and so explained) in the starter.
    for field in (
        "docs_root",
        "template",
        "name",
        "version",
        "aliases",
        "description",
        "local_path",
        "allow_outside_project",
        "web_sources",
        "type",
        "url",
        "branch",
        "paths",
        "options",
    ):
        assert re.search(rf"^\s*#?\s*-?\s*{field}:", starter, re.MULTILINE), field


async def test_list_docsets_and_search_docs_work_against_the_starter(project: Path, tmp_path: Path) -> None:
    (project / "docs").mkdir()
    assert runner.invoke(app, ["new", "-C", str(project)]).exit_code == 0
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        listed = await client.call_tool("list_docsets", {})
        found = await client.call_tool("search_docs", {"docset": "project", "keywords": ["install"]})
    assert not listed.is_error and not found.is_error
    assert [d["name"] for d in json.loads(text(listed))] == ["project"]
    assert text(found).startswith(f"Search for 'install' in folder {project.as_posix()}/docs/.")


def test_new_never_replaces_a_config(project: Path) -> None:
    path = write_config(project, "docsets: []\n")
    result = runner.invoke(app, ["new", "-C", str(project)])
    assert result.exit_code == 1
    assert (
        f"{path} already exists" in result.output
        and "move it away and run `agentic-knowledge new` again" in result.output
    )
    assert path.read_text() == "docsets: []\n"


def test_new_in_a_folder_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["new", "-C", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "is not a folder" in result.output
    assert not (tmp_path / "missing").exists()


def test_new_below_a_configured_project_says_which_config_it_overrides(project: Path) -> None:
    outer = write_config(project, "docsets: []\n")
    inner = project / "packages" / "web"
    inner.mkdir(parents=True)
    result = runner.invoke(app, ["new", "-C", str(inner)])
    assert result.exit_code == 0 and f"takes the place of {outer}" in result.output
    assert config_of(inner).is_file()


@pytest.mark.slow
def test_init_without_a_docset_starts_a_new_project_and_lists_docsets_in_a_configured_one(project: Path) -> None:
    (project / "docs").mkdir()
    result = subprocess.run([CLI, "init"], cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"wrote {config_of(project)}" in result.stdout and "agentic-knowledge status " in result.stdout
    assert load_project(config_of(project)).docsets[0].name == "project"

    again = subprocess.run([CLI, "init"], cwd=project, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2
    assert "name the docset to download" in again.stderr and "Docsets in" in again.stderr and "project" in again.stderr
    assert load_project(config_of(project)).docsets[0].name == "project"  # untouched


def help_text(*args: str) -> str:
    """The help as words: rich wraps lines and draws boxes at the terminal's width."""
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(re.sub(r"[│╭╮╰╯─┃]", " ", result.output).split())


def test_help_names_new_and_what_init_does_without_a_docset() -> None:
    assert "new Write a commented starter .knowledge/config.yaml" in help_text()
    new = help_text("new")
    assert "Never replaces an existing file" in new and "--project-dir" in new
    init = help_text("init")
    assert (
        "Without DOCSET, in a project with no .knowledge/config.yaml yet (here or above), "
        "write the commented starter one, as `new` does" in init
    )
    assert "Without DOCSET in a project that has a configuration, list the docsets to choose from" in init


def test_the_missing_config_error_points_at_new(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "-C", str(tmp_path)])
    assert result.exit_code == 2 and "`agentic-knowledge new` writes a commented one" in result.output
