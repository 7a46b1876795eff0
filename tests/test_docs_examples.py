"""Every code example in README.md and docs/*.md, run or checked as a reader would use it.

Each page's blocks run in order in a folder of their own, with a data directory of their own
(``AGENTLOOM_DATA_DIR``), so a later block sees what an earlier one made:

- ``python``: a block whose first line is ``# folder/file.py`` is a file the page asks the reader
  to write, and is written there; any other block runs as a script.
- ``toml``: ``# folder/pyproject.toml`` is written the same way; any other block is agentloom's
  settings file, read into the settings model, with every key one the model (or the pack's own
  settings model) has.
- ``yaml``: a ``.knowledge/config.yaml``, loaded by the docs pack.
- ``json``: a client configuration; each server's command must be one this package installs, and
  answer ``--help`` with its arguments.
- ``bash`` / ``sh``: every command is run for real (``agentloom``, ``agentic-knowledge``, and
  ``pip install`` of a folder the page wrote, into the page's own folder, not the environment).
- ``text``: output or a diagram, not code.

A block that cannot run here (it installs system packages, serves until stopped, needs a live
Flowise) carries ``<!-- not-tested: the reason -->`` on the line above it. Those are counted:
``NOT_TESTED`` below must change with them, so none goes unnoticed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
SCRIPTS = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])
LANGUAGES = {"python", "bash", "sh", "toml", "yaml", "json", "text"}
# Blocks marked not-tested, page by page: a new one (or one fewer) changes this on purpose.
NOT_TESTED = {
    "README.md": 4,
    "development.md": 3,
    "flowise.md": 2,
    "stitch-api.md": 1,
    "stitch-metrics.md": 1,
    "stitch.md": 1,
}
FENCE = re.compile(r"^```(\S*)\n(.*?)^```\n", re.S | re.M)
MARK = re.compile(r"<!-- not-tested: (.+?) -->\s*$")
FILE_HEADER = re.compile(r"^# ([\w.-]+/[\w./-]+\.(?:py|toml))\n")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    not_tested: str | None

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def file(self) -> str | None:
        """The path the reader is asked to write this block to, when it names one."""
        header = FILE_HEADER.match(self.code)
        return header.group(1) if header else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, match.group(1), match.group(2), mark.group(1) if mark else None))
    return found


ALL = [block for page in PAGES for block in blocks(page)]


def test_every_block_has_a_language_and_every_skip_a_reason() -> None:
    unknown = [f"{b.name} ```{b.language}" for b in ALL if b.language not in LANGUAGES]
    assert not unknown, f"blocks without a language this test knows ({sorted(LANGUAGES)}): {unknown}"
    counted: dict[str, int] = {}
    for block in ALL:
        if block.not_tested is not None:
            assert len(block.not_tested.strip()) > 5, f"{block.name}: say why it is not tested"
            counted[block.page.name] = counted.get(block.page.name, 0) + 1
    assert counted == NOT_TESTED, "blocks marked not-tested changed: update NOT_TESTED with the reason"


def test_every_page_is_linked_from_the_readme_or_another_page() -> None:
    links = "\n".join(page.read_text() for page in PAGES)
    for page in PAGES[1:]:
        assert f"{page.name})" in links or f"{page.name}#" in links, f"nothing links to docs/{page.name}"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_lead_to_files() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, f"links to nothing: {broken}"


def environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLOOM_", "STITCH_"))}
    env["AGENTLOOM_DATA_DIR"] = str(folder / "data")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    # The checkout's sources first (they are what the editable install points at in CI), then
    # whatever a page's `pip install` put in its folder.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(folder / "site")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run(
    argv: list[str], folder: Path, block: Block, timeout: float = 180, exported: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = environment(folder) | (exported or {})
    done = subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, (
        f"{block.name}: `{shlex.join(argv)}` exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done


def commands(code: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = code.replace("\\\n", " ")
    lines = [line.split(" #", 1)[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run_shell(block: Block, folder: Path) -> None:
    exported: dict[str, str] = {}
    for command in commands(block.code):
        argv = shlex.split(command)
        if argv[0] == "export" and len(argv) == 2 and "=" in argv[1]:
            name, value = argv[1].split("=", 1)
            exported[name] = value
        elif argv[:2] == ["pip", "install"] and len(argv) == 3 and (folder / argv[2]).is_dir():
            # Into the page's folder (on PYTHONPATH for its later blocks), not the shared environment.
            pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", "site", argv[2]]
            run(pip, folder, block, exported=exported)
        elif argv[0] in SCRIPTS:
            run([str(BIN / argv[0]), *argv[1:]], folder, block, exported=exported)
        else:
            pytest.fail(f"{block.name}: `{command}` is not a command this test runs; mark the block not-tested")


def check_client_configuration(block: Block, folder: Path) -> None:
    config = json.loads(block.code)
    for name, server in config["mcpServers"].items():
        command = Path(server["command"]).name
        assert command in SCRIPTS, f"{block.name}: {name} runs {command}, which this package does not install"
        assert (BIN / command).is_file(), f"{block.name}: {BIN / command} is missing"
        if server.get("args"):
            run([str(BIN / command), *server["args"], "--help"], folder, block, timeout=60)
        for variable in server.get("env", {}):
            assert variable.startswith("AGENTLOOM_"), f"{block.name}: {variable} is not an agentloom setting"


def check_settings(block: Block) -> None:
    from agentloom.core.settings import Settings
    from agentloom.packs.docs.settings import DocsSettings
    from agentloom.packs.vectors.settings import VectorSettings

    data = tomllib.loads(block.code)
    settings = Settings.model_validate(data)
    unknown = set(data) - set(Settings.model_fields)
    for table in ("breakers", "embeddings"):
        unknown |= {f"{table}.{k}" for k in set(data.get(table, {})) - set(type(getattr(settings, table)).model_fields)}
    packs = {"vectors": VectorSettings, "docs": DocsSettings}
    for pack, values in data.get("pack_settings", {}).items():
        model = packs[pack]
        model.model_validate(values)
        unknown |= {f"pack_settings.{pack}.{k}" for k in set(values) - set(model.model_fields)}
    assert not unknown, f"{block.name}: settings that do not exist: {sorted(unknown)}"


def check_docs_configuration(block: Block, folder: Path) -> None:
    from agentloom.packs.docs.config import load_project

    assert isinstance(yaml.safe_load(block.code), dict)
    config = folder / "yaml-project" / ".knowledge" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(block.code)
    project = load_project(config)
    assert project.docsets, f"{block.name}: no docsets"


def run_block(block: Block, folder: Path) -> None:
    if block.file is not None:
        target = folder / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code)
    elif block.language == "python":
        script = folder / f"example_{block.line}.py"
        script.write_text(block.code)
        run([sys.executable, str(script)], folder, block)
    elif block.language in ("bash", "sh"):
        run_shell(block, folder)
    elif block.language == "json":
        check_client_configuration(block, folder)
    elif block.language == "toml":
        check_settings(block)
    elif block.language == "yaml":
        check_docs_configuration(block, folder)


RUNNABLE = {
    page: [b for b in ALL if b.page == page and b.not_tested is None and b.language != "text"] for page in PAGES
}


# One test per page, its blocks in order in one folder: a page's later blocks use what the earlier
# ones wrote or installed. Pages share nothing, so each is its own pytest-xdist group (the groups of
# a test are joined), and the pages run in parallel under --dist loadgroup.
@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [pytest.param(page, marks=pytest.mark.xdist_group(f"docs-{page.stem}")) for page in PAGES if RUNNABLE[page]],
    ids=lambda page: page.name,
)
def test_the_examples_of_a_page_run(page: Path, tmp_path: Path) -> None:
    for block in RUNNABLE[page]:
        run_block(block, tmp_path)
