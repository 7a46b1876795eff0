"""A bounded fuzz of the MCP server over stdio: a few thousand malformed, odd and valid
messages (fixed seed), after which the server must still be up, must have written nothing
but JSON-RPC to stdout, and must have answered every request whose id it could read."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.server.clients import RawStdio

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

SEED = 20261123
MESSAGES = 3000
METHODS = [
    "tools/call",
    "tools/list",
    "ping",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "logging/setLevel",
    "completion/complete",
    "initialize",
    "no/such/method",
]
TOOLS = ["search_docs", "list_docsets", "breaker_reset", "no_such_tool", ""]


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**63, -(2**70), 1.5, 1e308])
    if kind == 3:
        return rng.choice(["", "x", "\u0000", "\ud7ff", "é", "../../etc/passwd", "{", "a" * 500])
    if kind in (4, 5):
        return "".join(rng.choice('abc_-./ \t{}[]"\\') for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(["docset", "keywords", "name", "x", "", "$in"]): value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def message(rng: random.Random, next_id: int) -> tuple[str, int | str | None]:
    """One line to send, and the id a reply must carry (None: no reply is required)."""
    roll = rng.random()
    if roll < 0.1:  # not JSON at all
        return rng.choice(["{", "nul", "[1,", '{"jsonrpc": "2.0", "id": 1', "\x00", "}{", "[]"]), None
    if roll < 0.2:  # JSON, but not a request
        return json.dumps(value(rng)), None
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": rng.choice(METHODS)}
    if request["method"] == "tools/call":
        request["params"] = {"name": rng.choice(TOOLS), "arguments": value(rng)}
        if rng.random() < 0.7:
            request["params"]["arguments"] = {"docset": value(rng), "keywords": value(rng)}
    elif rng.random() < 0.8:
        request["params"] = value(rng)
    if rng.random() < 0.15:
        return json.dumps(request), None  # a notification: no reply
    request_id: int | str = next_id if rng.random() < 0.7 else f"r-{next_id}"
    request["id"] = request_id
    if rng.random() < 0.05:
        request["jsonrpc"] = rng.choice(["1.0", 2, None])
        return json.dumps(request), None  # invalid; a reply with its id is welcome but not required
    return json.dumps(request), request_id


def test_the_server_survives_a_seeded_fuzz_and_answers_every_readable_request(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    log = (tmp_path / "stderr.log").open("w+")
    raw = RawStdio(server_env, "--packs", "docs", stderr=log)  # a file: a full stderr pipe would block the server
    replies: list[dict[str, Any]] = []
    reader_error: list[BaseException] = []

    def read() -> None:
        assert raw.proc.stdout is not None
        try:
            for line in raw.proc.stdout:
                replies.append(json.loads(line))  # every stdout line must be JSON-RPC
        except BaseException as exc:
            reader_error.append(exc)

    try:
        assert raw.initialize()["result"]["serverInfo"]["name"] == "agentloom"
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        expected: list[int | str] = []
        for i in range(MESSAGES):
            line, reply_id = message(rng, 1000 + i)
            raw.send_line(line.replace("\n", " "))
            if reply_id is not None:
                expected.append(reply_id)
        raw.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
        import time

        deadline = time.monotonic() + 120
        while not any(r.get("id") == "last" for r in replies) and time.monotonic() < deadline:
            assert raw.proc.poll() is None, "the server died during the fuzz"
            time.sleep(0.05)
    finally:
        raw.close()
        log.seek(0)
        stderr = log.read()
    assert not reader_error, reader_error
    assert any(r.get("id") == "last" and r.get("result") == {} for r in replies), stderr[-2000:]
    answered = {r.get("id") for r in replies}
    missing = [i for i in expected if i not in answered]
    assert not missing, f"{len(missing)} requests never answered, e.g. {missing[:5]}"
    assert "Traceback" not in stderr, stderr[-3000:]


def test_a_deeply_nested_request_is_answered_with_its_own_id(server_env: dict[str, str]) -> None:
    raw = RawStdio(server_env, "--packs", "docs")
    try:
        raw.initialize()
        deep: dict[str, Any] = {}
        current = deep
        for _ in range(300):
            current["a"] = {}
            current = current["a"]
        reply = raw.request(
            77, "tools/call", {"name": "search_docs", "arguments": {"docset": "x", "keywords": ["k"], "x": deep}}
        )
        assert reply["id"] == 77 and reply["error"]["code"] == -32600
        assert "deeper than 100 levels" in reply["error"]["message"]
        assert raw.request(78, "ping")["id"] == 78
    finally:
        raw.close()
