"""A SKILL.md whose frontmatter does not parse is named, with its line and the fix, by skills_search and health
(skipped.py), over stdio with a real MCP client, and again by a new process, until the file is fixed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.packs.skills.conftest import write_skill
from tests.server.clients import stdio_client_session

pytestmark = pytest.mark.slow  # a server process with the skills pack (docs/development.md)

BROKEN = "---\nname: pivot-report\ndescription: Use this when: the user wants a pivot table\n---\nSteps.\n"


def _env(tmp_path: Path, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(
        AGENTLOOM_DATA_DIR=str(tmp_path / "data"),
        AGENTLOOM_SKILLS__ROOTS=json.dumps([str(root)]),
        AGENTLOOM_SKILLS__SCAN_ON_START="false",
    )
    return env


async def test_an_unparsable_skill_is_named_by_search_and_health_until_fixed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "git-commit", "Write a commit message for the staged changes")
    (root / "pivot-report").mkdir(parents=True)
    (root / "pivot-report" / "SKILL.md").write_text(BROKEN, encoding="utf-8")
    env = _env(tmp_path, root)
    async with stdio_client_session(env, "--packs", "skills") as client:
        indexed = (await client.call_tool("skills_index", {})).structured_content
        assert indexed["added"] == 1 and len(indexed["skipped"]) == 1
        reply = (await client.call_tool("skills_search", {"query": "commit my changes"})).structured_content
        assert [hit["name"] for hit in reply["results"]] == ["git-commit"]
        [entry] = reply["skipped"]
        assert entry["path"] == str(root / "pivot-report" / "SKILL.md")
        assert "line 3" in entry["reason"] and "Fix: put the value in quotes" in entry["reason"]
        assert "pivot-report" in reply["message"] and "does not parse" in reply["message"]
    async with stdio_client_session(env, "--packs", "skills") as client:  # a new process reads what the scan kept
        health = (await client.call_tool("health", {})).structured_content
        [check] = [c for c in health["checks"] if c["name"] == "skill files"]
        assert not check["ok"] and not check["required"] and "line 3" in check["detail"]
        (root / "pivot-report" / "SKILL.md").write_text(BROKEN.replace("this when:", "this when"), encoding="utf-8")
        fixed = (await client.call_tool("skills_index", {})).structured_content
        assert fixed["added"] == 1 and fixed["skipped"] == []
        reply = (await client.call_tool("skills_search", {"query": "pivot table"})).structured_content
        assert "skipped" not in reply and reply["results"][0]["name"] == "pivot-report"
        health = (await client.call_tool("health", {})).structured_content
        assert not [c for c in health["checks"] if c["name"] == "skill files"]
