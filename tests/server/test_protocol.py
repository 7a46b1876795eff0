"""Exact protocol answers, through real clients: raw JSON lines over stdio, raw HTTP, the SDK client.

Each test names the point it covers: capabilities and unknown prompts, malformed
envelopes, explained params errors, HTTP refusals, log notifications.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp_types import LoggingMessageNotificationParams, SetLevelRequestParams

from agentloom.server.client_logging import ClientLogRelay
from tests.conftest import PYTHON
from tests.server.clients import RawStdio, serve_args
from tests.server.protocol_clients import (
    CHATTY_LOGGER,
    INITIALIZE,
    STREAMABLE,
    RawStdioLogged,
    exchange,
    http_server,
    install_chatty,
    log_lines,
    receive_until,
    replies,
)


@pytest.fixture
def chatty_env(pack_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The test packs plus ``chatty`` (a pack that logs under ``agentloom.packs.chatty``)."""
    site = install_chatty(tmp_path / "chatty")
    pack_env["PYTHONPATH"] = f"{site}:{pack_env['PYTHONPATH']}"
    return pack_env


# -- 1. capabilities, unknown prompt ------------------------------------------------------------------


@pytest.mark.slow
def test_unknown_prompt_is_invalid_params_naming_it_and_only_real_capabilities_are_advertised(
    pack_env: dict[str, str],
) -> None:
    raw = RawStdio(pack_env, "--packs", "echo")
    try:
        capabilities = raw.initialize()["result"]["capabilities"]
        assert set(capabilities) == {"tools", "logging"}  # no prompts, no resources: the server has none
        _, prompt = exchange(raw, 2, "prompts/get", {"name": "summarize"})
        assert prompt["error"]["code"] == -32602
        assert "'summarize'" in prompt["error"]["message"] and "no prompts" in prompt["error"]["message"]
        for request_id, method in enumerate(("prompts/list", "resources/list", "resources/templates/list"), 3):
            _, listed = exchange(raw, request_id, method)
            assert listed["error"]["code"] == -32601, (method, listed)  # not declared: not available
        _, missing = exchange(raw, 9, "resources/read", {"uri": "file:///nope"})
        assert missing["error"]["code"] == -32602
    finally:
        stderr = raw.stderr()
    assert "Traceback" not in stderr and "handler for 'prompts/get' raised" not in stderr  # before: both, at ERROR


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 (server/discover) and 2025-11-25 (initialize)
async def test_sdk_client_sees_only_real_capabilities(pack_env: dict[str, str], mode: str) -> None:
    params = StdioServerParameters(command=PYTHON, args=serve_args("--packs", "echo"), env=pack_env)
    async with Client(stdio_client(params), mode=mode) as client:  # type: ignore[arg-type]  # a Transport: Client enters it
        capabilities = client.server_capabilities
    assert capabilities.tools is not None and capabilities.logging is not None
    assert capabilities.prompts is None and capabilities.resources is None


# -- 2. malformed envelopes ----------------------------------------------------------------------------


UNANSWERABLE_IDS = [None, {"n": 1}, [1], True, 1.5]


@pytest.mark.slow
def test_requests_with_unusable_or_readable_ids_are_answered_over_stdio(pack_env: dict[str, str]) -> None:
    raw = RawStdio(pack_env, "--packs", "echo")
    try:
        raw.initialize()
        for bad in UNANSWERABLE_IDS:
            raw.send({"jsonrpc": "2.0", "id": bad, "method": "tools/list"})
            reply = raw.receive()  # before: no reply at all (read as a notification)
            assert reply["id"] is None and reply["error"]["code"] == -32600, (bad, reply)
            assert "`id` must be a string or an integer" in reply["error"]["message"]
        cases: list[tuple[dict[str, Any], Any, int, str]] = [
            ({"jsonrpc": "1.0", "id": 5, "method": "tools/list"}, 5, -32600, '`jsonrpc` must be the string "2.0"'),
            ({"id": "abc", "method": "tools/list"}, "abc", -32600, "`jsonrpc`"),
            ({"jsonrpc": "2.0", "id": 7, "method": 42}, 7, -32600, "`method` must be a string"),
            (
                {"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": [1]},
                8,
                -32602,
                "`params` must be an object",
            ),
            ({"jsonrpc": "2.0", "id": 9}, 9, -32600, "no `method`"),
        ]
        for message, request_id, code, text in cases:
            raw.send(message)
            reply = raw.receive()  # before: "id": null, so the client could not match it
            assert reply["id"] == request_id and reply["error"]["code"] == code, (message, reply)
            assert text in reply["error"]["message"], reply
        assert raw.request(10, "tools/list")["id"] == 10  # still serving
    finally:
        raw.close()


@pytest.mark.slow
def test_requests_with_unusable_or_readable_ids_are_answered_over_http(pack_env: dict[str, str]) -> None:
    with http_server(pack_env, "--packs", "echo") as url:
        opened = httpx.post(url, json=INITIALIZE, headers=STREAMABLE, timeout=30)
        session = {**STREAMABLE, "mcp-session-id": opened.headers["mcp-session-id"]}
        for bad in UNANSWERABLE_IDS:
            reply = httpx.post(url, json={"jsonrpc": "2.0", "id": bad, "method": "tools/list"}, headers=session)
            assert reply.status_code == 400, (bad, reply.status_code, reply.text)  # before: 202, never answered
            assert reply.json()["id"] is None and reply.json()["error"]["code"] == -32600
        reply = httpx.post(url, json={"jsonrpc": "1.0", "id": 5, "method": "tools/list"}, headers=session)
        assert reply.status_code == 400 and reply.json()["id"] == 5  # before: "id": null
        assert "mcp-session-id" not in reply.headers


# -- 3. explained params errors ------------------------------------------------------------------------


@pytest.mark.slow
def test_params_errors_and_requests_before_initialize_say_what_is_wrong_over_stdio(pack_env: dict[str, str]) -> None:
    raw = RawStdio(pack_env, "--packs", "echo")
    try:
        _, early = exchange(raw, 1, "tools/list")
        message = early["error"]["message"]  # before: "Invalid request parameters", data ""
        assert "tools/list was sent before initialize" in message and "Send initialize first" in message
        assert early["error"]["data"] == {"method": "tools/list", "reason": "not initialized"}
        assert raw.request(2, "ping")["result"] == {}  # ping is always answered
        raw.send({**INITIALIZE, "id": 3})
        raw.receive()
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        _, nameless = exchange(raw, 4, "tools/call", {"arguments": {}})
        assert nameless["error"]["code"] == -32602
        assert "Invalid params for tools/call: `params.name` is missing" in nameless["error"]["message"]
        assert "tools/list" in nameless["error"]["message"]  # where to find a name
        _, listed = exchange(raw, 5, "tools/call", {"name": "echo", "arguments": ["hi"]})
        text = listed["error"]["message"]
        assert "`params.arguments` must be an object" in text and "got an array" in text
        assert listed["error"]["data"]["errors"][0]["field"] == "params.arguments"
        _, level = exchange(raw, 6, "logging/setLevel", {"level": "loud"})
        assert "`params.level` must be one of debug, info" in level["error"]["message"]
        assert "'loud'" in level["error"]["message"]
    finally:
        raw.close()


@pytest.mark.slow
def test_params_errors_and_requests_without_session_say_what_is_wrong_over_http(pack_env: dict[str, str]) -> None:
    with http_server(pack_env, "--packs", "echo") as url:
        early = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=STREAMABLE)
        assert early.status_code == 400 and early.json()["id"] == 1
        assert "needs a session" in early.json()["error"]["message"]
        assert "Send initialize first" in early.json()["error"]["message"]
        assert "mcp-session-id" not in early.headers  # before: a session id for a session discarded at once
        opened = httpx.post(url, json=INITIALIZE, headers=STREAMABLE, timeout=30)
        session = {
            **STREAMABLE,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        nameless = replies(
            httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}}, headers=session)
        )
        assert "`params.name` is missing" in nameless[-1]["error"]["message"]
        listed = replies(
            httpx.post(
                url,
                json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": []}},
                headers=session,
            )
        )
        assert "`params.arguments` must be an object" in listed[-1]["error"]["message"]


# -- 4. HTTP refusals ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_http_refusals_hand_out_no_session_and_bad_version_headers_are_named(pack_env: dict[str, str]) -> None:
    with http_server(pack_env, "--packs", "echo") as url:
        wrong_accept = httpx.post(url, json=INITIALIZE, headers={**STREAMABLE, "Accept": "application/json"})
        bad_body = httpx.post(url, content=b"{not json", headers=STREAMABLE)
        wrong_method = httpx.put(url, json=INITIALIZE, headers=STREAMABLE)
        no_stream = httpx.get(url, headers={"Accept": "application/json"})
        for response, status in ((wrong_accept, 406), (bad_body, 400), (wrong_method, 405), (no_stream, 406)):
            assert response.status_code == status, (status, response.text)
            assert "mcp-session-id" not in response.headers, (status, response.headers)
        assert bad_body.json()["error"]["code"] == -32700

        for version in ("2099-01-01", "latest"):
            refused = httpx.post(url, json=INITIALIZE, headers={**STREAMABLE, "MCP-Protocol-Version": version})
            assert refused.status_code == 400 and "mcp-session-id" not in refused.headers
            error = refused.json()["error"]
            assert refused.json()["id"] == 1
            assert f"Unsupported MCP-Protocol-Version header {version!r}" in error["message"]  # before: about _meta
            assert "2025-11-25" in error["message"] and "2026-07-28" in error["message"]
            assert error["data"]["requested"] == version and "2025-11-25" in error["data"]["supported"]
        stream = httpx.get(url, headers={"Accept": "text/event-stream", "MCP-Protocol-Version": "1.0"})
        assert stream.status_code == 400 and "MCP-Protocol-Version" in stream.json()["error"]["message"]

        opened = httpx.post(url, json=INITIALIZE, headers=STREAMABLE, timeout=30)
        assert opened.status_code == 200 and opened.headers["mcp-session-id"]  # a real session still gets one


# -- 5. log notifications ------------------------------------------------------------------------------


@pytest.mark.slow
def test_log_records_reach_a_stdio_client_that_set_a_level(chatty_env: dict[str, str]) -> None:
    raw = RawStdio(chatty_env, "--packs", "chatty")
    try:
        assert "logging" in raw.initialize()["result"]["capabilities"]
        before, answer = exchange(raw, 2, "tools/call", {"name": "chatty_log", "arguments": {"text": "first"}})
        assert answer["result"]["content"][0]["text"] == "logged first"
        assert log_lines(before) == []  # no level set yet: nothing is sent

        assert exchange(raw, 3, "logging/setLevel", {"level": "warning"})[1]["result"] == {}
        before, _ = exchange(raw, 4, "tools/call", {"name": "chatty_log", "arguments": {"text": "second"}})
        assert log_lines(before) == [("warning", "warning: second"), ("error", "error: second")]  # before the answer

        exchange(raw, 5, "logging/setLevel", {"level": "debug"})
        before, _ = exchange(raw, 6, "tools/call", {"name": "chatty_log", "arguments": {"text": "third"}})
        # What the server logs (it runs at INFO): a client's level never lowers the server's loggers.
        assert [level for level, _ in log_lines(before)] == ["info", "warning", "error"]
        before, _ = exchange(raw, 7, "tools/call", {"name": "chatty_log_async", "arguments": {"text": "fourth"}})
        assert log_lines(before) == [("warning", "async warning: fourth")]

        exchange(raw, 8, "tools/call", {"name": "chatty_later", "arguments": {"text": "fifth"}})
        later = receive_until(raw, lambda m: m.get("params", {}).get("data") == "background: fifth")
        assert log_lines(later) == [("warning", "background: fifth")]  # outside any request, on the connection
    finally:
        stderr = raw.stderr()
    assert "info: third" in stderr and "debug: third" not in stderr  # stderr keeps the configured level (INFO)
    assert "warning: first" in stderr


def test_a_client_gets_debug_records_from_a_server_that_logs_at_debug(
    chatty_env: dict[str, str], tmp_path: Path
) -> None:
    raw = RawStdioLogged(dict(chatty_env, AGENTLOOM_LOG_LEVEL="DEBUG"), tmp_path / "stderr.log", "--packs", "chatty")
    try:
        raw.initialize()
        exchange(raw, 2, "logging/setLevel", {"level": "debug"})
        before, _ = exchange(raw, 3, "tools/call", {"name": "chatty_log", "arguments": {"text": "one"}})
        assert log_lines(before) == [
            ("debug", "debug: one"),
            ("info", "info: one"),
            ("warning", "warning: one"),
            ("error", "error: one"),
        ]
        exchange(raw, 4, "logging/setLevel", {"level": "warning"})
        before, _ = exchange(raw, 5, "tools/call", {"name": "chatty_log", "arguments": {"text": "two"}})
        assert log_lines(before) == [("warning", "warning: two"), ("error", "error: two")]
    finally:
        stderr = raw.stderr()
    assert "debug: one" in stderr and "debug: two" in stderr  # stderr at the configured level, as ever


@pytest.mark.slow
def test_log_relay_neither_recurses_nor_blocks(chatty_env: dict[str, str], tmp_path: Path) -> None:
    raw = RawStdioLogged(chatty_env, tmp_path / "stderr.log", "--packs", "chatty")
    try:
        raw.initialize()
        exchange(raw, 2, "logging/setLevel", {"level": "info"})
        before, answer = exchange(raw, 3, "tools/call", {"name": "chatty_nested", "arguments": {}})
        assert answer["result"]["content"][0]["text"] == "nested done"
        lines = log_lines(before)
        assert lines.count(("warning", "nested: loud object")) == 1
        # Logged while the relay formats the record: not relayed. (The stderr handler formats it too, and
        # what it logs then is an ordinary record, relayed once.)
        assert lines.count(("warning", "logged while formatting a log line")) <= 1

        # 5,000 lines logged at once: the call is answered (a full queue drops, never blocks; a hang
        # meets the suite's timeout), and the server still answers after.
        before, answer = exchange(raw, 4, "tools/call", {"name": "chatty_flood", "arguments": {"count": 5000}})
        assert answer["result"]["structuredContent"]["result"] == 5000
        flood = [int(data.split()[1]) for _, data in log_lines(before)]
        assert flood == sorted(flood) and 0 < len(flood) <= 5000  # in order; a full queue drops, never blocks
        assert raw.request(5, "ping")["result"] == {}
    finally:
        stderr = raw.stderr()
    assert "logged while formatting a log line" in stderr  # stderr still gets everything


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # set_logging_level, 2025-era API
async def test_log_records_reach_sdk_clients_of_both_protocol_eras(chatty_env: dict[str, str]) -> None:
    params = StdioServerParameters(command=PYTHON, args=serve_args("--packs", "chatty"), env=chatty_env)
    legacy: list[LoggingMessageNotificationParams] = []
    modern: list[LoggingMessageNotificationParams] = []
    silent: list[LoggingMessageNotificationParams] = []

    def collect(into: list[LoggingMessageNotificationParams]) -> Any:
        async def callback(params: LoggingMessageNotificationParams) -> None:
            into.append(params)

        return callback

    async with Client(stdio_client(params), mode="legacy", logging_callback=collect(legacy)) as client:  # type: ignore[arg-type]  # a Transport: Client enters it
        await client.set_logging_level("error")
        await client.call_tool("chatty_log", {"text": "legacy"})
    async with Client(stdio_client(params), log_level="warning", logging_callback=collect(modern)) as client:  # type: ignore[arg-type]  # a Transport: Client enters it
        assert client.protocol_version == "2026-07-28"
        await client.call_tool("chatty_log", {"text": "modern"})
    async with Client(stdio_client(params), logging_callback=collect(silent)) as client:  # type: ignore[arg-type]  # a Transport: Client enters it
        await client.call_tool("chatty_log", {"text": "nobody asked"})
    assert [(p.level, p.data) for p in legacy if p.logger == CHATTY_LOGGER] == [("error", "error: legacy")]
    assert [(p.level, p.data) for p in modern] == [("warning", "warning: modern"), ("error", "error: modern")]
    assert silent == []  # 2026-07-28 without the per-request opt-in: nothing may be sent


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_http_sessions_get_their_own_request_logs_only(chatty_env: dict[str, str]) -> None:
    with http_server(chatty_env, "--packs", "chatty") as url:
        got: dict[str, list[str]] = {"a": [], "b": []}
        three = {"a": anyio.Event(), "b": anyio.Event()}

        def collect(name: str) -> Any:
            async def callback(params: LoggingMessageNotificationParams) -> None:
                if params.logger == CHATTY_LOGGER:
                    got[name].append(str(params.data))
                    if len(got[name]) >= 3:
                        three[name].set()

            return callback

        async with (
            Client(url, mode="legacy", logging_callback=collect("a")) as a,
            Client(url, mode="legacy", logging_callback=collect("b")) as b,
        ):
            await a.set_logging_level("info")
            await b.set_logging_level("info")
            await a.call_tool("chatty_log", {"text": "for a"})
            await b.call_tool("chatty_log", {"text": "for b"})
            with anyio.fail_after(60):
                await three["a"].wait()
                await three["b"].wait()
    assert got["a"] == ["info: for a", "warning: for a", "error: for a"]  # on the POST's own SSE stream
    assert got["b"] == ["info: for b", "warning: for b", "error: for b"]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # send_log_message, 2025-era API
async def test_a_log_written_while_sending_a_log_is_not_relayed_again() -> None:
    """In process: the one path no client can trigger on purpose, a record logged by the send itself."""
    sent: list[str] = []
    first_sent, second_sent = anyio.Event(), anyio.Event()
    chatty = logging.getLogger("agentloom.packs.chatty")

    class LoggingChannel:
        async def notify(self, method: str, params: Any, opts: Any = None) -> None:
            sent.append(params["data"])
            (second_sent if params["data"] == "second" else first_sent).set()
            chatty.warning("written while sending %s", params["data"])

        async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> Any:
            raise AssertionError("no requests")

    connection = Connection(LoggingChannel(), protocol_version="2025-11-25")
    session = ServerSession(LoggingChannel(), connection)  # type: ignore[arg-type]  # the request's channel: unused
    request = ServerRequestContext(
        session=session, lifespan_context={}, protocol_version="2025-11-25", method="logging/setLevel", request_id=1
    )
    relay = ClientLogRelay()
    async with relay.running():
        await relay.set_level(request, SetLevelRequestParams(level="info"))
        chatty.warning("first")
        with anyio.fail_after(60):
            await first_sent.wait()
            # One queue, drained in order: once "second" is sent, a relayed "written while sending
            # first" would have been sent before it.
            chatty.warning("second")
            await second_sent.wait()
    assert sent == ["first", "second"]
