"""Seed 003's two retrieval scenarios, as written, in a folder of near neighbours in both languages
(data/neighbours.json: two git skills, two spreadsheet skills, a CSV and a chart skill, some described in
Chinese), searched over stdio by a real MCP client (issue 49)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.server.clients import stdio_client_session

pytestmark = pytest.mark.slow  # a server process with the skills pack (docs/development.md)

SKILLS = json.loads((Path(__file__).parent / "data" / "neighbours.json").read_text(encoding="utf-8"))["skills"]


async def test_seed_scenarios_hold_among_near_neighbours(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for name, description in SKILLS.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(description, ensure_ascii=False)}\n---\nDo it.\n",
            encoding="utf-8",
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLOOM_")}
    env.update(
        AGENTLOOM_DATA_DIR=str(tmp_path / "data"),
        AGENTLOOM_SKILLS__ROOTS=json.dumps([str(root)]),
        AGENTLOOM_SKILLS__SCAN_ON_START="false",
    )
    async with stdio_client_session(env, "--packs", "skills") as client:
        assert (await client.call_tool("skills_index", {})).structured_content["added"] == len(SKILLS)

        async def search(query: str, **arguments: object) -> list[tuple[str, float]]:
            reply = (await client.call_tool("skills_search", {"query": query, **arguments})).structured_content
            hits = [(hit["name"], hit["score"]) for hit in reply["results"]]
            assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
            return hits

        commit = await search("帮我提交代码", limit=5)
        assert commit[0][0] == "git-commit" and commit[0][1] > 0.75, commit
        excel = await search("分析Excel文件", limit=3)
        assert "excel-analysis" in [name for name, _ in excel], excel
        assert dict(excel)["excel-analysis"] > 0.7, excel
        assert len(await search("帮我提交代码", limit=5, threshold=0)) == 5
        pivot = await search("pivot table of sales by region from my xlsx", limit=3)
        assert pivot[0][0] in {"excel-analysis", "xlsx-formulas"}, pivot  # a spreadsheet skill, not the chart one
        assert await search("how long should I boil an egg for a runny yolk") == []
