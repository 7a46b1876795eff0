"""Every command's help: a flag shows no type tag, an option a word for its value, never a Python type."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from agentloom.cli import add_pack_commands, app
from agentloom.packs.docs.cli import app as docs_app
from agentloom.terminal.help import suggestions

PYTHON_TYPE = re.compile(r"<(bool|str|int|float|path|list\[\w+\])[^>]*>")


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


def help_text(root: Any, path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(root, [*path, "--help"], env={"COLUMNS": "200"}, terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_serve_help_shows_flags_bare_and_values_by_name() -> None:
    text = help_text(app, ("serve",))
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("│ --")}
    assert re.search(r"--http +Serve", rows["--http"]), rows["--http"]
    assert re.search(r"--help +Show", rows["--help"]), rows["--help"]
    assert re.search(r"--port +PORT +HTTP port", rows["--port"]), rows["--port"]
    assert re.search(r"--data-dir +DIR +Data directory", rows["--data-dir"]), rows["--data-dir"]
    assert re.search(r"--packs +NAMES +Comma", rows["--packs"]), rows["--packs"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["agentloom", "agentic-knowledge"])
def test_no_help_shows_a_python_type(name: str) -> None:
    root = app if name == "agentloom" else docs_app
    if root is app:
        add_pack_commands(app)  # every installed pack's commands
    paths = list(commands(get_command(root)))
    assert len(paths) > (20 if root is app else 4)
    for path in paths:
        found = PYTHON_TYPE.findall(help_text(root, path))
        assert not found, f"{name} {' '.join(path)} --help shows {found}"


def test_suggestions_know_other_words_for_a_command() -> None:
    assert suggestions("list", ["init", "new", "refresh", "status"]) == ["status"]
    assert suggestions("ls", ["index", "list", "search", "status"]) == ["list", "status"]
    assert suggestions("stauts", ["init", "new", "refresh", "status"]) == ["status"]
    assert suggestions("version", ["serve"], ("--version",)) == ["--version"]
    assert suggestions("frobnicate", ["init", "new"]) == []
