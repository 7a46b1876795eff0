"""Tool definitions saved by one start and listed by the next, built on first call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client

from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from agentloom.server.sdk_compat import lowlevel_server
from agentloom.server.toolcache import ToolCache, registration_key
from tests.server.test_pack_interface import count


def _host(tmp_path: Path, cache: Path) -> Host:
    packs = [ep for ep in discover_packs() if ep.name in ("core", "skills")]
    # No start-up scan: two hosts on one data directory would scan it at once, which is not what is tested here.
    settings = Settings(
        data_dir=tmp_path / "data",
        cache_dir=cache,
        log_level="ERROR",
        pack_settings={"skills": {"scan_on_start": False}},
    )
    return Host(settings, packs)


def _listing(host: Host) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with Client(host.server) as client:
            return [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools
            ]

    return anyio.run(go)


def test_a_second_start_lists_the_same_tools_from_the_cache_and_calls_them(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _host(tmp_path, cache)
    assert first.server._deferred == {}  # nothing saved yet: every tool registered at start
    files = list((cache / "tools").glob("*.json"))
    assert len(files) == 1
    second = _host(tmp_path, cache)
    assert set(second.server._deferred) == set(second.server.tool_names())
    listed = _listing(second)
    assert listed == _listing(first)
    schema = lowlevel_server(second.server).get_tool_input_schema  # what Mcp-Param headers are checked against
    assert schema is not None
    assert [schema(name) for name in second.server.tool_names()] == [t["inputSchema"] for t in listed]
    assert second.server.tool_names() == first.server.tool_names()

    async def calls() -> tuple[Any, Any, Any]:
        async with Client(second.server) as client:
            ok = await client.call_tool("skills_list", {})
            unknown = await client.call_tool("skills_search", {"query": "git", "bogus": 1})
            mistyped = await client.call_tool("skills_search", {"query": "git", "limit": "many"})
            return ok, unknown, mistyped

    ok, unknown, mistyped = anyio.run(calls)
    assert not ok.is_error and ok.structured_content is not None and "skills" in ok.structured_content
    assert unknown.is_error and "does not take `bogus`" in unknown.content[0].text
    assert mistyped.is_error and "limit" in mistyped.content[0].text
    assert "skills_search" not in second.server._deferred  # built on its first call


def test_a_damaged_cache_file_costs_only_time(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    expected = _listing(_host(tmp_path, cache))
    (file,) = (cache / "tools").glob("*.json")
    file.write_text("{not json")
    again = _host(tmp_path, cache)
    assert again.server._deferred == {}
    assert _listing(again) == expected
    assert json.loads(file.read_text())  # written again, whole


def test_an_unwritable_cache_folder_is_no_error(tmp_path: Path) -> None:
    blocked = tmp_path / "cache"
    blocked.mkdir()
    (blocked / "tools").write_text("a file where the folder would be")
    host = _host(tmp_path, blocked)
    assert "health" in host.server.tool_names()
    assert _listing(host)


def test_tools_of_other_distributions_are_never_cached_and_a_changed_registration_misses(tmp_path: Path) -> None:
    cache = ToolCache(tmp_path)
    options = {"name": "count", "description": "Record a word"}
    assert count.__module__.startswith("tests.")  # not agentloom's code: not in the fingerprint
    from agentloom.server.toolcache import cacheable

    assert not cacheable(count)
    assert registration_key(count, options) != registration_key(count, {**options, "description": "Other"})
    assert cache.get(registration_key(count, options)) is None
