"""Stitch against hostile input (issue: input schemas and graph checks that hold), on SQLite and
PostgreSQL, each through a running ``agentloom stitch serve``:

- for each case, the time to its answer (goal <= 2 s, a 4xx or a 200 with a problem) and the
  slowest ``/health`` asked from another client meanwhile (goal <= 1 s);
- a 5,000-node cycle sent to ``/flows/validate``: time (goal < 1 s), reply size (goal < 64 KB)
  and the server's RSS after against before (goal within 50 MB).

The cases are those of ``tests/stitch/test_hostile_*.py``; the tests prove the behaviour, this
measures how long it takes.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks.report import write_section
from tests.stitch.conftest import PG_ADMIN, StitchServer, drop_pg_database, fresh_pg_database
from tests.stitch.hostile import flow_input_graph, gate_graph, waiting_gate, while_health_is_asked
from tests.stitch.test_hostile_graphs import ring, rss_kb
from tests.stitch.test_hostile_schemas import DOUBLING, EVIL, EVIL_TEXT, chained_one_of, nested

Send = Callable[[httpx.Client], httpx.Response]


def cases(server: StitchServer) -> list[tuple[str, Send]]:
    evil = {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}}
    remote = {"type": "object", "allOf": [{"$id": "http://127.0.0.1:9/a/", "$ref": "b.json"}]}
    unique = {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}
    evil_gate, costly_gate, unique_gate = (waiting_gate(server, s) for s in (evil, DOUBLING, unique))
    costly_flow = server.http.post("/flows", json={"name": "x", "graph": flow_input_graph(DOUBLING)}).json()["id"]
    many = {"x": [{"a": i} for i in range(60_000)] + [{"a": 7}]}
    return [
        ("remote $ref, save", lambda c: c.post("/flows", json={"name": "x", "graph": gate_graph(remote)})),
        ("26 chained oneOf, validate", lambda c: c.post("/flows/validate", json=gate_graph(chained_one_of()))),
        ("^(a+)+$ at a gate", lambda c: c.post(f"/complete/{evil_gate}/gate", json={"x": EVIL_TEXT})),
        ("budget spent at a gate", lambda c: c.post(f"/complete/{costly_gate}/gate", json=nested(40))),
        ("budget spent at run start", lambda c: c.post(f"/flows/{costly_flow}/runs", json={"input": nested(40)})),
        ("uniqueItems, 60,000 objects", lambda c: c.post(f"/complete/{unique_gate}/gate", json=many)),
    ]


def measure(kind: str, tmp: Path) -> tuple[list[str], str]:
    tmp.mkdir(parents=True)
    url = f"sqlite:///{tmp / 'hostile.db'}" if kind == "SQLite" else fresh_pg_database(PG_ADMIN)
    server = StitchServer(url, tmp).start()
    rows = []
    try:
        for name, send in cases(server):
            done = while_health_is_asked(server, send)
            slowest = max((seconds for _, seconds in done.health), default=0.0) * 1000
            rows.append(
                f"| {kind} | {name} | {done.reply.status_code} | {done.seconds:.2f} s | "
                f"{slowest:.0f} ms ({len(done.health)}) |"
            )
        assert server.proc is not None
        server.http.post("/flows/validate", json={"graph": ring(50)})
        before = rss_kb(server.proc.pid)
        began = time.perf_counter()
        reply = server.http.post("/flows/validate", json={"graph": ring(5_000)})
        took = time.perf_counter() - began
        after = rss_kb(server.proc.pid)
        cycle = f"| {kind} | {took * 1000:.0f} ms | {len(reply.content):,} B | {(after - before) / 1024:+.1f} MB |"
    finally:
        server.stop()
        if kind == "PostgreSQL":
            drop_pg_database(PG_ADMIN, url)
    return rows, cycle


def main() -> None:
    rows, cycles = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("SQLite", "PostgreSQL"):
            found, cycle = measure(kind, Path(tmp) / kind)
            rows += found
            cycles.append(cycle)
    body = "\n".join(
        [
            "Each hostile request, its answer and its time (goal <= 2 s), and the slowest `/health` asked "
            "from another client while it was out (goal <= 1 s; how many were asked in brackets):",
            "",
            "| database | case | status | answered in | slowest /health |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "A 5,000-node cycle sent to `POST /flows/validate` (goals: < 1 s, < 64 KB, RSS within 50 MB):",
            "",
            "| database | time | reply | RSS after - before |",
            "|---|---|---|---|",
            *cycles,
        ]
    )
    print(body)
    write_section("stitch-hostile", body, "python -m benchmarks stitch-hostile")


if __name__ == "__main__":
    main()
