"""What every agent pays in every conversation: `tools/list` with every pack loaded, through the SDK client.

The budget is the compact JSON of the result's tools, as the server sends it (issue 36: 52 KB before,
28 KB at most then; BENCHMARKS.md, "tools/list", has the figures per pack and in tokens). Issue 41
added stitch_list_waiting (the gates and the input schema an answer must fit): 0.7 KB more. Issue 49
added skills_search's `skipped` (the SKILL.md files that do not parse, so no search can find them): 31 bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.server.clients import call, stdio_client_session

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

BUDGET = 28_750  # bytes
PACKS = {"core", "docs", "flowise", "skills", "stitch", "vectors"}  # every pack agentloom ships
CODE_INDENT = re.compile(r"^[ \t]+\S", re.MULTILINE)  # a line indented like the code a docstring came from


async def test_tools_list_with_every_pack_fits_the_budget_and_reads_as_prose(server_env: dict[str, str]) -> None:
    async with stdio_client_session(server_env) as client:
        tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]
        health = await call(client, "health", check_model=False)
    loaded = {p["name"] for p in health["packs"] if p["status"] == "loaded"}
    assert loaded == PACKS, health["packs"]
    assert {t["name"] for t in tools} == {name for p in health["packs"] for name in p["tools"]}
    size = len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode())
    assert size <= BUDGET, f"tools/list is {size:,} bytes with every pack; the budget is {BUDGET:,}"
    for tool in tools:
        description = tool.get("description", "")
        assert description.strip(), f"{tool['name']} has no description"
        assert description == description.strip(), tool["name"]
        assert not CODE_INDENT.search(description), f"{tool['name']}'s description keeps the code's indentation"
        _assert_lean(tool["name"], tool["inputSchema"])
        assert tool["inputSchema"]["additionalProperties"] is False, tool["name"]  # the strict-argument rule
        if "outputSchema" in tool:
            _assert_lean(tool["name"], tool["outputSchema"])
            assert tool["outputSchema"]["type"] == "object", tool["name"]


def _assert_lean(tool: str, schema: Any, names: bool = False) -> None:
    """No pydantic title anywhere (a property may be *called* title)."""
    if isinstance(schema, list):
        for item in schema:
            _assert_lean(tool, item)
    elif isinstance(schema, dict):
        if not names:
            assert "title" not in schema or not isinstance(schema["title"], str), f"{tool}: {schema}"
        for key, value in schema.items():
            _assert_lean(tool, value, names=key in ("properties", "$defs") and not names)


async def test_the_tools_setting_lists_only_the_chosen_tools_and_names_a_pattern_that_chose_none(
    server_env: dict[str, str],
) -> None:
    server_env["AGENTLOOM_TOOLS"] = "skills_*"  # the flag wins over the variable
    async with stdio_client_session(server_env, "--tools", "vector_search, skills_s*,nosuch_*") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        health = await call(client, "health", check_model=False)
        refused = await client.call_tool("vector_add_document", {"collection": "c", "text": "t"})
    assert names == {"health", "breaker_reset", "vector_search", "skills_search"}  # core's are always listed
    assert {p["name"]: p["tools"] for p in health["packs"]}["vectors"] == ["vector_search"]
    assert refused.is_error and "Unknown tool 'vector_add_document'" in refused.content[0].text  # type: ignore[union-attr]
    (check,) = [c for c in health["checks"] if c["name"] == "tools setting"]
    assert check == {
        "name": "tools setting",
        "ok": False,
        "detail": "'nosuch_*' matches no tool of the loaded packs",
        "required": False,
    }
