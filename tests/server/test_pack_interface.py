"""The pack interface: typed state injected per server, strict argument schemas, one error path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from agentloom.core.breakers import DependencyFailure
from agentloom.core.errors import AgentloomError
from agentloom.core.settings import Settings
from agentloom.server.host import Host, discover_packs
from agentloom.server.packs import Pack, PackContext


@dataclass
class Counter:
    label: str
    calls: list[str] = field(default_factory=list)


counter_pack: Pack[Counter] = Pack("counter", "Counts calls per server")


@counter_pack.setup
def _setup(ctx: PackContext) -> Counter:
    return Counter(str(ctx.settings.data_dir))


@counter_pack.tool(read_only=True)
def count(counter: Counter, word: str, times: int = 1) -> dict[str, Any]:
    """Record a word; answers which server's state it landed in."""
    counter.calls.extend([word] * times)
    return {"label": counter.label, "calls": len(counter.calls)}


@counter_pack.tool()
def fail(counter: Counter, how: str) -> str:
    """Fail in a chosen way."""
    if how == "refuse":
        raise AgentloomError("how: 'refuse' was asked for; pass another value")
    if how == "outage":
        raise DependencyFailure("Example service at 127.0.0.1:9 is unreachable; start it")
    raise KeyError("secret internal detail")


@pytest.fixture
def counter_entry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import sys
    import types

    module = types.ModuleType("agentloom_counter_pack")
    module.pack = counter_pack  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "agentloom_counter_pack", module)
    yield


def counter_host(data_dir: Path) -> Host:
    from importlib.metadata import EntryPoint

    ep = EntryPoint(name="counter", value="agentloom_counter_pack:pack", group="agentloom.packs")
    core = [e for e in discover_packs() if e.name == "core"]
    return Host(Settings(data_dir=data_dir), [*core, ep])


async def test_two_servers_in_one_process_keep_their_own_state(tmp_path: Path, counter_entry: None) -> None:
    first, second = counter_host(tmp_path / "a"), counter_host(tmp_path / "b")
    async with Client(first.server) as a, Client(second.server) as b:
        assert (await a.call_tool("count", {"word": "x", "times": 3})).structured_content == {
            "label": str(tmp_path / "a"),
            "calls": 3,
        }
        assert (await b.call_tool("count", {"word": "y"})).structured_content == {
            "label": str(tmp_path / "b"),
            "calls": 1,
        }
        assert (await a.call_tool("count", {"word": "z"})).structured_content["calls"] == 4  # type: ignore[index]
    assert first.packs["counter"].state.calls == ["x", "x", "x", "z"]
    assert second.packs["counter"].state.calls == ["y"]
    assert not hasattr(counter_pack, "context") and not hasattr(counter_pack, "state")  # declarations only


async def test_state_is_not_an_argument_and_unknown_arguments_are_refused(tmp_path: Path, counter_entry: None) -> None:
    async with Client(counter_host(tmp_path).server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        schema = tools["count"].input_schema
        assert set(schema["properties"]) == {"word", "times"} and schema["additionalProperties"] is False
        for tool in tools.values():
            assert tool.input_schema.get("additionalProperties") is False, tool.name
        result = await client.call_tool("count", {"word": "x", "counter": "forged", "wrod": 1})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("count does not take `counter`, `wrod`. Accepted arguments: word, times.")
    assert "`wrod` -> `word`?" in text


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "count is missing the required argument `word` (a string)."),
        ({"word": "x", "times": "five"}, "count: `times`: expected an integer, got 'five'."),
        ({"word": ["a"]}, "count: `word`: expected a string, got ['a']."),
    ],
)
async def test_bad_arguments_get_one_line_naming_the_argument(
    tmp_path: Path, counter_entry: None, arguments: dict[str, Any], expected: str
) -> None:
    async with Client(counter_host(tmp_path).server) as client:
        result = await client.call_tool("count", arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and text == expected
    assert "pydantic" not in text and "http" not in text


async def test_every_failure_takes_the_same_path(
    tmp_path: Path, counter_entry: None, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(counter_host(tmp_path).server) as client:
        refused = await client.call_tool("fail", {"how": "refuse"})
        outage = await client.call_tool("fail", {"how": "outage"})
        crash = await client.call_tool("fail", {"how": "crash"})
        unknown = await client.call_tool("cuont", {})
    assert refused.is_error and refused.content[0].text == "how: 'refuse' was asked for; pass another value"  # type: ignore[union-attr]
    assert outage.is_error and outage.content[0].text == "Example service at 127.0.0.1:9 is unreachable; start it"  # type: ignore[union-attr]
    assert (
        crash.is_error
        and crash.content[0].text == "fail failed with an internal error (KeyError); the server log has the details."
    )  # type: ignore[union-attr]
    assert "secret internal detail" not in crash.content[0].text  # type: ignore[union-attr]
    assert "secret internal detail" in caplog.text  # the traceback stays in the server log
    assert unknown.is_error and unknown.content[0].text.startswith("Unknown tool 'cuont'. Did you mean `count`?")  # type: ignore[union-attr]


async def test_core_tools_are_a_pack_loaded_like_the_others(tmp_path: Path) -> None:
    host = Host(Settings(data_dir=tmp_path, packs=["docs"]))
    assert [r.name for r in host.reports if r.status == "loaded"] == ["core", "docs"]
    assert {"health", "breaker_reset"} <= host.tool_names
    off = Host(Settings(data_dir=tmp_path, packs=["docs"], disabled_packs=["core"]))
    assert "health" not in off.tool_names
    async with Client(host.server) as client:
        report = (await client.call_tool("health", {"check_model": False})).structured_content
    assert [p["name"] for p in report["packs"] if p["status"] == "loaded"] == ["core", "docs"]  # type: ignore[index]


def test_the_core_cli_imports_no_pack_cli_by_name() -> None:
    source = (Path(__file__).parents[2] / "src/agentloom/cli/__init__.py").read_text()
    assert "agentloom.packs" not in source
    import typer

    from agentloom.cli import add_pack_commands

    app = typer.Typer()
    add_pack_commands(app)
    names = {group.name for group in app.registered_groups}
    assert {"docs", "stitch"} <= names


def test_a_command_opens_a_pack_with_the_setup_the_server_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One opener: the host runs setup with the services it shares; ``Pack.open`` (what a pack's command
    calls, through ``open_pack``) runs the same function outside a server."""
    import sys
    import types
    from importlib.metadata import EntryPoint

    seen: list[PackContext] = []
    opened: Pack[Path] = Pack("opened", "Records the contexts its setup gets")

    @opened.setup
    def _open(ctx: PackContext) -> Path:
        seen.append(ctx)
        return ctx.data_dir / "state.db"

    module = types.ModuleType("agentloom_opened_pack")
    module.pack = opened  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "agentloom_opened_pack", module)
    ep = EntryPoint(name="opened", value="agentloom_opened_pack:pack", group="agentloom.packs")
    settings = Settings(data_dir=tmp_path)
    host = Host(settings, [*[e for e in discover_packs() if e.name == "core"], ep])
    served = host.packs["opened"].state
    assert opened.open(settings) == served == tmp_path / "opened" / "state.db"
    assert (tmp_path / "opened").is_dir()
    in_server, in_command = seen
    assert in_server.serving and in_server.host is host
    assert in_server.breakers is host.breakers and in_server.embeddings is host.embeddings  # shared, made once
    assert not in_command.serving and in_command.host is None
    assert in_command.breakers is not host.breakers
    assert in_command.breakers.failure_threshold == settings.breakers.failure_threshold
    assert in_command.embeddings is in_command.embeddings and in_command.embeddings.settings is settings


def test_a_pack_without_setup_has_nothing_to_open(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'bare' declares no setup"):
        Pack("bare", "No state").open(Settings(data_dir=tmp_path))


def test_the_core_pack_opens_only_in_a_server(tmp_path: Path) -> None:
    from agentloom.packs.core import pack as core

    with pytest.raises(TypeError, match="the core pack is the server's own"):
        core.open(Settings(data_dir=tmp_path))
