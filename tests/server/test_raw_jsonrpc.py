"""Newline-delimited JSON-RPC written by hand: what a sloppy client or a stray print would send."""

from __future__ import annotations

import pytest

from tests.server.clients import RawStdio

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)


def test_stdout_carries_only_protocol_and_parse_errors_keep_the_server_up(pack_env: dict[str, str]) -> None:
    raw = RawStdio(pack_env)
    try:
        assert raw.initialize()["result"]["serverInfo"]["name"] == "agentloom"
        raw.send_line("{this is not json")
        error = raw.receive()
        assert error == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": error["error"]["message"]}}
        raw.send_line('{"no": "jsonrpc"}')
        assert raw.receive()["error"]["code"] == -32600
        raw.send_line(
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "noisy", "arguments": {}}}'
        )
        reply = raw.receive()  # the tool printed to stdout; the next line must still be its JSON-RPC reply
        assert reply["id"] == 7 and reply["result"]["content"][0]["text"] == "still clean"
        assert raw.request(8, "tools/list")["id"] == 8
    finally:
        stderr = raw.stderr()
    assert "noisy tool output on stdout" in stderr
