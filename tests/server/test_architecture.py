"""ARCHITECTURE.md's example pack, installed through entry points exactly as written there."""

from __future__ import annotations

import os
import re
from pathlib import Path

import anyio
import pytest

from tests.conftest import PYTHON, REPO
from tests.server.clients import stdio_client_session

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def install_example(site: Path) -> None:
    text = (REPO / "ARCHITECTURE.md").read_text()
    code = re.search(r"```python\n# notes_pack/__init__.py\n(.*?)```", text, re.S)
    entry = re.search(r"```toml\n# notes_pack\'s pyproject.toml\n(.*?)```", text, re.S)
    assert code and entry, "ARCHITECTURE.md lost its example pack"
    (site / "notes_pack").mkdir(parents=True)
    (site / "notes_pack" / "__init__.py").write_text(code.group(1))
    dist = site / "notes_pack-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: notes-pack\nVersion: 0.1\n")
    group = entry.group(1).replace('[project.entry-points."agentloom.packs"]', "[agentloom.packs]")
    (dist / "entry_points.txt").write_text(group.replace('"', ""))


async def test_the_documented_pack_works_from_the_server_and_the_cli(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    install_example(tmp_path / "site")
    # Kept after the example: a checkout run with PYTHONPATH=src (a worktree beside an editable install)
    # serves and runs its own code, as the pack_env fixture does.
    server_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "site"), server_env.get("PYTHONPATH")]))
    async with stdio_client_session(server_env, "--packs", "notes") as client:
        put = await client.call_tool("notes_put", {"key": "a", "text": "remember the milk"})
        assert put.structured_content == {"key": "a", "text": "remember the milk"}
        missing = await client.call_tool("notes_get", {"key": "b"})
        assert missing.is_error and missing.content[0].text == "key: no note 'b'; notes_put stores one"  # type: ignore[union-attr]  # a text block
        health = (await client.call_tool("health", {"check_model": False})).structured_content
        assert any(c["name"] == "notes file" and c["ok"] for c in health["checks"])  # type: ignore[index]  # the health tool's structured result
    with anyio.fail_after(60):
        listed = await anyio.run_process(
            [PYTHON, "-m", "agentloom", "notes", "list", "--data-dir", server_env["AGENTLOOM_DATA_DIR"]],
            env=server_env,
            check=False,
        )
    assert listed.returncode == 0, listed.stderr.decode()
    assert listed.stdout.decode() == "a: remember the milk\n"
