"""The skills pack served: in-process through the Host, and over stdio with the SDK client."""

from __future__ import annotations

import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from mcp.client import Client
from mcp_types import CallToolResult, TextContent

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from tests.packs.skills.conftest import SKILLS_EP, write_skill
from tests.server.clients import call, error, stdio_client_session


def _text(result: CallToolResult) -> str:
    """The reply's first content block, which the server sends as text."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


TOOLS = {"skills_search", "skills_get", "skills_index", "skills_list", "skills_remove"}


def host(tmp_path: Path, root: Path, **pack_settings: object) -> Host:
    pack_settings.setdefault("roots", [str(root)])
    settings = Settings(data_dir=tmp_path / "data", packs=["skills"], pack_settings={"skills": pack_settings})
    return Host(settings, [SKILLS_EP])


async def test_tools_in_process(tmp_path: Path, seed_root: Path) -> None:
    served = host(tmp_path, seed_root)
    assert TOOLS <= served.tool_names
    async with Client(served.server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        for name in TOOLS:
            assert listed[name].output_schema is not None, name
        assert (
            listed["skills_search"].annotations is not None
            and listed["skills_search"].annotations.read_only_hint is True
        )
        assert (
            listed["skills_remove"].annotations is not None
            and listed["skills_remove"].annotations.destructive_hint is True
        )
        updates: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append((progress, total, message))

        result = await client.call_tool(
            "skills_index", {}, progress_callback=on_progress
        )  # waits for the start-up scan
        assert not result.is_error, _text(result)
        counts = result.structured_content
        assert counts["added"] + counts["unchanged"] == 4 and counts["total"] == 4
        assert updates and updates[-1][0] == updates[-1][1] == 4
        found = await call(client, "skills_search", query="帮我提交代码")
        assert found["results"][0]["name"] == "git-commit" and found["results"][0]["score"] > 0.75
        assert set(found["results"][0]) == {"name", "description", "score", "path"}
        assert (await call(client, "skills_get", name="excel-analysis"))["body"] == "Do it."
        assert (await call(client, "skills_list"))["count"] == 4
        write_skill(seed_root, "pdf-merge", "Merge PDF files", ["pdf"])
        one = await call(client, "skills_index", path=str(seed_root / "pdf-merge"))
        assert one["added"] == 1 and one["total"] == 5
        assert (await call(client, "skills_remove", name="pdf-merge"))["removed"] is True
        assert "nearest: git-commit" in await error(client, "skills_get", name="git-comit")
        assert "query: it is empty" in await error(client, "skills_search", query="")


async def test_store_error_through_the_tool(tmp_path: Path, seed_root: Path) -> None:
    (tmp_path / "data" / "skills").mkdir(parents=True)
    (tmp_path / "data" / "skills" / "skills.lance").write_text("not a database")
    served = host(tmp_path, seed_root, scan_on_start=False)
    async with Client(served.server) as client:
        text = await error(client, "skills_search", query="帮我提交代码")
    assert "LANCE_SEARCH_ERROR" in text and "LanceDB connection failed" in text
    assert str(tmp_path / "data" / "skills" / "skills.lance") in text


def test_a_command_opens_the_servers_index_without_its_start_up_scan(tmp_path: Path, seed_root: Path) -> None:
    from agentloom.packs.skills import pack

    served = host(tmp_path, seed_root, scan_delay_seconds=3600)  # the scan waits: nothing races the command
    index = served.packs["skills"].state
    opened = pack.open(served.settings)  # what `agentloom skills ...` gets, through open_pack
    assert index.scanning and not opened.scanning
    assert opened.path == index.path and opened.roots == index.roots == [seed_root]
    assert opened.settings == index.settings


def test_entry_point_is_discovered() -> None:
    found = [ep for ep in discover_packs() if ep.name == "skills"]
    assert found and found[0].value == "agentloom.packs.skills:pack"


def _entry_point_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Until pyproject declares it, a spawned server finds the pack through a dist-info on PYTHONPATH."""
    if any(ep.name == "skills" for ep in entry_points(group="agentloom.packs")):
        return env
    site = tmp_path / "site"
    dist = site / "agentloom_skills_dev-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentloom-skills-dev\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[agentloom.packs]\nskills = agentloom.packs.skills:pack\n")
    return {**env, "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


@pytest.mark.slow
async def test_over_stdio(server_env: dict[str, str], tmp_path: Path, seed_root: Path) -> None:
    env = _entry_point_env(server_env, tmp_path)
    env["AGENTLOOM_SKILLS__ROOTS"] = f'["{seed_root}"]'
    async with stdio_client_session(env, "--packs", "skills", errlog=sys.stderr) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert TOOLS <= names
        await call(client, "skills_index")
        found = await call(client, "skills_search", query="分析Excel文件", limit=3)
        assert "excel-analysis" in [hit["name"] for hit in found["results"]][:3]
        assert next(h["score"] for h in found["results"] if h["name"] == "excel-analysis") > 0.7
        listed = await call(client, "skills_list")
        assert listed["count"] == 4
