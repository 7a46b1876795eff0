"""LoomServer's own call path (server/calls.py), called in process: names, contexts, the
refusal messages and the definitions it lists and caches."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import Icon
from pydantic import BaseModel, ValidationError

from agentloom.server.calls import LoomServer, definition
from agentloom.server.toolcache import ToolCache, registration_key


class Point(BaseModel):
    x: int


def search(query: str, limit: int = 5) -> str:
    return f"{query}:{limit}"


def who(ctx: Context) -> str:  # type: ignore[type-arg]  # bare, as packs write it
    return ctx.mcp_server.name


async def announce(ctx: Context) -> str:  # type: ignore[type-arg]  # bare, as packs write it
    await ctx.notify_tools_changed()  # needs the server's subscription bus
    return "announced"


def strict_data() -> str:
    Point.model_validate({"x": "not a number"})
    return "unreachable"


def wrong_shape() -> Point:
    return "not a point"  # type: ignore[return-value]  # the mistake under test


def call(server: LoomServer, name: str, arguments: dict[str, Any]) -> Any:
    return anyio.run(lambda: server.call_tool(name, arguments))


def text(result: Any) -> str:
    return result.content[0].text  # type: ignore[no-any-return]  # a text block


def test_the_server_takes_the_sdk_arguments() -> None:
    server = LoomServer("loom", instructions="use the tools")
    assert server.name == "loom" and server.instructions == "use the tools"


def test_a_tool_is_known_by_its_given_name() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(search, name="find")
    assert server.tool_names() == ["find"]
    assert text(call(server, "find", {"query": "q"})) == "q:5"
    schema = anyio.run(server.list_tools)[0].input_schema
    assert schema["additionalProperties"] is False and set(schema["properties"]) == {"query", "limit"}
    with pytest.raises(ToolError, match="Unknown tool 'search'"):
        call(server, "search", {"query": "q"})


def test_a_call_without_a_request_gets_this_servers_context() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(who)
    server.add_strict_tool(announce)
    assert text(call(server, "who", {})) == "loom"
    assert text(call(server, "announce", {})) == "announced"


def test_unknown_and_bad_arguments_are_named_together() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(search)
    with pytest.raises(ToolError) as refused:
        call(server, "search", {"query": "q", "limit": "many", "colour": "red"})
    assert str(refused.value) == (
        "search does not take `colour`. Accepted arguments: query, limit.\n"
        "search: `limit`: expected an integer, got 'many'."
    )
    with pytest.raises(ToolError) as unknown_only:
        call(server, "search", {"query": "q", "colour": "red"})
    assert str(unknown_only.value) == "search does not take `colour`. Accepted arguments: query, limit."


def test_a_pack_validating_its_own_data_says_where() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(strict_data)
    with pytest.raises(ToolError) as refused:
        call(server, "strict_data", {})
    assert str(refused.value) == (
        "strict_data: `x`: input should be a valid integer, unable to parse string as an integer (got 'not a number')"
    )
    assert isinstance(refused.value.__cause__, ValidationError)


def test_a_result_that_breaks_the_output_schema_is_an_internal_error() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(wrong_shape)
    with pytest.raises(UnexpectedToolError) as failed:
        call(server, "wrong_shape", {})
    assert str(failed.value) == "wrong_shape returned a result that does not match its output schema."


def test_the_cached_definition_is_what_the_sdk_lists() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(search, name="find", icons=[Icon(src="https://example.org/i.png")], meta={"pack": "test"})
    listed = anyio.run(server.list_tools)[0]
    tool = server.get_tool("find")
    assert tool is not None
    made = definition(tool)
    assert made == listed
    assert made.icons == [Icon(src="https://example.org/i.png")] and made.meta == {"pack": "test"}
    sdk = MCPServer("sdk")
    sdk.add_tool(search, name="find", icons=[Icon(src="https://example.org/i.png")], meta={"pack": "test"})
    (plain,) = anyio.run(sdk.list_tools)
    assert made.model_dump(exclude={"description", "input_schema", "output_schema"}) == plain.model_dump(
        exclude={"description", "input_schema", "output_schema"}
    )


def twice(word: str, times: int) -> str:
    return word * times


def ping() -> str:
    return "pong"


def test_only_agentloom_tools_are_cached(tmp_path: Path) -> None:
    cache = ToolCache(tmp_path)
    server = LoomServer("loom", tool_cache=cache)
    server.add_strict_tool(
        search
    )  # a tool from outside agentloom: its definition may change without our files changing
    assert cache.get(registration_key(search, {})) is None
    assert server._deferred == {} and server.tool_names() == ["search"]


def test_tools_of_other_distributions_are_not_saved_in_the_cache(tmp_path: Path) -> None:
    cache = ToolCache(tmp_path)
    server = LoomServer("loom", tool_cache=cache)
    server.add_strict_tool(search)
    server.save_tool_cache()
    assert list((tmp_path / "tools").glob("*.json")) == []  # nothing new to write
    again = LoomServer("loom", tool_cache=ToolCache(tmp_path))
    again.add_strict_tool(search)
    assert again._deferred == {}  # built at once, not listed from a cache


def test_tools_are_listed_in_the_order_they_were_added_and_a_name_is_registered_once() -> None:
    server = LoomServer("loom")
    server.add_strict_tool(twice)
    server.add_strict_tool(search)
    server.add_strict_tool(ping, name="twice")
    assert server.tool_names() == ["twice", "search"]
    assert [t.name for t in anyio.run(server.list_tools)] == ["twice", "search"]
    assert text(call(server, "twice", {"word": "a", "times": 3})) == "aaa"


def test_the_sdks_own_registration_adds_a_strict_tool() -> None:
    server = LoomServer("loom")
    server.add_tool(search, name="find", title="Find")

    @server.tool()
    def shout(word: str) -> str:
        return word.upper()

    assert server.tool_names() == ["find", "shout"]
    listed = anyio.run(server.list_tools)
    assert listed[0].title == "Find" and listed[0].input_schema["additionalProperties"] is False
    assert text(call(server, "shout", {"word": "hi"})) == "HI"
    with pytest.raises(ToolError, match="does not take `loud`"):
        call(server, "shout", {"word": "hi", "loud": True})


def test_the_sdk_finds_each_tools_strict_input_schema() -> None:
    """What the SDK checks ``Mcp-Param-*`` headers against (streamable HTTP, 2026-07-28) is the listed schema."""
    from agentloom.server.sdk_compat import lowlevel_server

    server = LoomServer("loom")
    server.add_strict_tool(search)
    lookup = lowlevel_server(server).get_tool_input_schema
    assert lookup is not None
    assert lookup("search") == anyio.run(server.list_tools)[0].input_schema
    assert lookup("nothing") is None


def test_without_a_cache_a_tool_needs_only_a_name_and_a_signature() -> None:
    server = LoomServer("loom")
    doubled = functools.partial(twice, times=2)  # no __qualname__: nothing may ask for a registration key
    doubled.__name__ = "doubled"  # type: ignore[attr-defined]  # a partial has none; the SDK reads it
    server.add_strict_tool(doubled)
    assert server.tool_names() == ["doubled"]
    assert text(call(server, "doubled", {"word": "ab"})) == "abab"


def test_a_tool_whose_schema_has_no_properties_refuses_every_argument() -> None:
    handmade = Tool.from_function(ping).model_copy(update={"parameters": {"type": "object"}})
    server = LoomServer("loom", tools=[handmade])
    assert text(call(server, "ping", {})) == "pong"
    with pytest.raises(ToolError) as refused:
        call(server, "ping", {"x": 1})
    assert str(refused.value) == "ping does not take `x`. Accepted arguments: none."
