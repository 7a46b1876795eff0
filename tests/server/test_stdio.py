"""The server as MCP clients launch it: `agentloom serve` over stdio."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.clients import stdio_client_session

pytestmark = [
    pytest.mark.parametrize("mode", ["auto", "legacy"]),  # 2026-07-28 and 2025-11-25
    pytest.mark.slow,  # every test here takes seconds (docs/development.md)
]


async def test_tools_list_has_schemas_and_annotations(pack_env: dict[str, str], mode: str) -> None:
    async with stdio_client_session(pack_env, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"health", "breaker_reset", "echo", "echo_forget", "noisy"} <= set(tools)
    assert not {"broken_tool", "missing_tool"} & set(tools)
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.input_schema["type"] == "object"
        assert tool.annotations is not None
    echo = tools["echo"]
    assert echo.input_schema["required"] == ["text"]
    assert echo.output_schema is not None and set(echo.output_schema["properties"]) == {"text", "times"}
    assert echo.annotations.read_only_hint is True  # idempotentHint says nothing more of a read-only tool (MCP)
    assert tools["echo_forget"].annotations.destructive_hint is True
    assert tools["echo_forget"].annotations.read_only_hint in (False, None)  # absent means false (MCP)
    assert tools["health"].output_schema is not None


async def test_call_returns_structured_content(pack_env: dict[str, str], mode: str) -> None:
    async with stdio_client_session(pack_env, mode=mode) as client:
        result = await client.call_tool("echo", {"text": "ab", "times": 2})
    assert not result.is_error
    assert result.structured_content == {"text": "abab", "times": 2}


async def test_errors_name_the_tool_or_the_field(pack_env: dict[str, str], mode: str) -> None:
    async with stdio_client_session(pack_env, mode=mode) as client:
        unknown = await client.call_tool("no_such_tool", {})
        missing = await client.call_tool("echo", {})
        wrong_type = await client.call_tool("echo", {"text": "a", "times": "many"})
        rejected = await client.call_tool("echo", {"text": "a", "times": 0})
        still_up = await client.call_tool("echo", {"text": "ok"})
    assert unknown.is_error and "no_such_tool" in unknown.content[0].text
    assert missing.is_error and "text" in missing.content[0].text and "required" in missing.content[0].text.lower()
    assert wrong_type.is_error and "times" in wrong_type.content[0].text
    assert rejected.is_error and "times: must be at least 1" in rejected.content[0].text
    assert still_up.structured_content == {"text": "ok", "times": 1}


async def test_failing_packs_are_skipped_and_reported(pack_env: dict[str, str], mode: str, tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with log.open("w") as errlog:
        async with stdio_client_session(pack_env, mode=mode, errlog=errlog) as client:
            result = await client.call_tool("health", {"check_model": False})
    report = result.structured_content
    assert report is not None
    packs = {p["name"]: p for p in report["packs"]}
    assert packs["echo"]["status"] == "loaded" and packs["echo"]["tools"] == ["echo", "echo_forget"]
    assert packs["broken"]["status"] == "failed"
    assert "database at 127.0.0.1:1 unreachable" in packs["broken"]["reason"]
    assert packs["needs_missing"]["status"] == "failed"
    assert "missing dependency agentloom_no_such_lib" in packs["needs_missing"]["reason"]
    assert "pip install 'agentloom-no-such-lib[extra]'" in packs["needs_missing"]["reason"]  # the pack's own hint
    assert "ModuleNotFoundError" in packs["badimport"]["reason"]
    assert "expected agentloom Pack" in packs["notapack"]["reason"]
    assert report["status"] == "error"
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["echo store reachable"]["ok"] is True
    assert checks["data directory writable"]["ok"] is True
    # An extra left uninstalled is a warning; a pack that broke is an error.
    assert checks["pack needs_missing"]["required"] is False and checks["pack broken"]["required"] is True
    stderr = log.read_text()
    assert "pack broken skipped: ConnectionError: database at 127.0.0.1:1 unreachable" in stderr
    assert "noisy setup output on stdout" in stderr  # diverted, not lost


async def test_packs_flag_enables_only_the_named_packs(pack_env: dict[str, str], mode: str) -> None:
    async with stdio_client_session(pack_env, "--packs", "echo,nonesuch", mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        report = (await client.call_tool("health", {"check_model": False})).structured_content
    assert names == {"health", "breaker_reset", "echo", "echo_forget"}
    statuses = {p["name"]: p["status"] for p in report["packs"]}
    assert statuses["broken"] == "disabled" and statuses["noisy"] == "disabled"
    assert statuses["nonesuch"] == "not-installed"


async def test_a_pack_named_in_packs_whose_extra_is_missing_is_an_error(pack_env: dict[str, str], mode: str) -> None:
    async with stdio_client_session(pack_env, "--packs", "echo,needs_missing", mode=mode) as client:
        report = (await client.call_tool("health", {"check_model": False})).structured_content
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["pack needs_missing"]["required"] is True and report["status"] == "error"


async def test_configuration_disables_a_pack(pack_env: dict[str, str], mode: str) -> None:
    pack_env["AGENTLOOM_DISABLED_PACKS"] = (
        "echo,broken,needs_missing,badimport,notapack,vectors,docs,stitch,skills,flowise"
    )
    async with stdio_client_session(pack_env, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        report = (await client.call_tool("health", {"check_model": False})).structured_content
    assert names == {"health", "breaker_reset", "noisy"}
    assert report["status"] == "ok"
