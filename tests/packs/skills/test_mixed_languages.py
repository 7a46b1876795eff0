"""A folder that mixes English- and Chinese-described skills, searched over stdio by a real MCP client (issue 38).

The set is benchmarks/data/skills_mixed: 27 skills, 12 described in Chinese, in groups of near neighbours
(three about git, two about code review, two about spreadsheets...), written with its requests by a helper
that never saw the ranking code (benchmarks/data/skills_heldout.md). BENCHMARKS.md reports the whole set.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.server.clients import stdio_client_session

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

DATA = REPO / "benchmarks" / "data"


async def test_requests_in_either_language_find_skills_described_in_either(tmp_path: Path) -> None:
    root = Path(shutil.copytree(DATA / "skills_mixed", tmp_path / "skills"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(
        AGENTLOOM_DATA_DIR=str(tmp_path / "data"),
        AGENTLOOM_SKILLS__ROOTS=json.dumps([str(root)]),
        AGENTLOOM_SKILLS__SCAN_ON_START="false",
    )
    unrelated = json.loads((DATA / "skills_unrelated.json").read_text(encoding="utf-8"))
    async with stdio_client_session(env, "--packs", "skills") as client:
        assert not (await client.call_tool("skills_index", {})).is_error

        async def search(query: str, **arguments: object) -> dict:
            result = await client.call_tool("skills_search", {"query": query, **arguments})
            assert not result.is_error, result.content
            return result.structured_content

        commit = await search("帮我提交代码", limit=3)
        assert [h["name"] for h in commit["results"]][:1] == ["git-commit"], commit  # described in English
        assert (await search("commit my staged changes with a good message"))["results"][0]["name"] == "git-commit"
        notes = await search("turn these meeting notes into minutes with action items")
        assert notes["results"][0]["name"] == "meeting-notes-zh"  # described in Chinese
        for reply in (commit, notes):
            scores = [h["score"] for h in reply["results"]]
            assert scores == sorted(scores, reverse=True) and scores[0] >= reply["threshold"] == 0.5
        for query in unrelated["en"][:5] + unrelated["zh"][:5]:
            assert (await search(query))["results"] == [], query
