"""Stitch for the long haul: a soak at the highest sustained rate with retention on, timing the reads
people and tools make meanwhile, then completion rates with retention and metrics on and off.

The soak, on SQLite (one `agentloom stitch serve --workers 2`) and on PostgreSQL (two
`agentloom stitch serve`, one process each, on one database): IN_FLIGHT runs of a CHAIN-node
Worker chain are kept in flight (closed loop: a run that finishes is replaced at once) for
STITCH_SOAK_SECONDS, with retention keeping finished runs KEEP seconds and pruning every
PRUNE_EVERY seconds. Meanwhile:

- a separate process times three reads in turn: the first page of the flow's runs (50), the page
  after 5,000 runs (its cursor found again every 10 s by walking pages of 1,000) and /health;
- every SAMPLE seconds the database's size (SQLite: file and WAL after a passive checkpoint;
  PostgreSQL: pg_database_size) is sampled, /metrics is scraped and parsed with
  prometheus_client's own parser, and the runs still in flight are looked up in the database:
  one missing would be an unfinished run pruned;
- errors are counted: a run start or read that was not answered 2xx, a callback answered anything
  but 200 (a 503 with Retry-After is retried, and counted apart), a run that never finished.

At the end the load stops, the backlog drains and /metrics is scraped once more: the dispatch
backlog and the callbacks waiting for a turn must be back at 0.

Then PAIRED_ROUNDS rounds of STITCH_SOAK_PAIRED_SECONDS each alternate retention and metrics on
(retention keeping PAIRED_KEEP seconds, pruning every 5 s, /metrics scraped every SAMPLE seconds)
with both off (STITCH_RETENTION_ENABLED=false, no scrape; the counters themselves are always
kept), each on a fresh database, and the ratio of the median completion rates is reported.

Run it short while developing: STITCH_SOAK_SECONDS=90 STITCH_SOAK_KEEP=30 python -m benchmarks stitch-soak
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.report import percentile, write_section
from benchmarks.stitch import PG_ADMIN, ROOT, database, free_port, serve_command, server_env, wait_http

SECONDS = float(os.environ.get("STITCH_SOAK_SECONDS", 600))
IN_FLIGHT = int(os.environ.get("STITCH_SOAK_IN_FLIGHT", 400))
KEEP = float(os.environ.get("STITCH_SOAK_KEEP", 120))  # seconds retention keeps a finished run
PRUNE_EVERY = 10.0
PAIRED_SECONDS = float(os.environ.get("STITCH_SOAK_PAIRED_SECONDS", 60))
PAIRED_ROUNDS = int(os.environ.get("STITCH_SOAK_PAIRED_ROUNDS", 3))
PAIRED_KEEP = 20.0
CHAIN = 3
SAMPLE = 10.0
DEEP = 5000  # the deep page: the one after this many runs
PAGE = 50
STEADY_WINDOW = 300.0  # the database size must stay within STEADY_BAND over the soak's last this many seconds
STEADY_BAND = 0.15
READ_GOAL_MS = 50.0
RATE_GOAL = 0.9
KINDS = tuple(os.environ.get("STITCH_SOAK_DATABASES", "SQLite,PostgreSQL").split(","))


# -- servers -----------------------------------------------------------------------------------
@dataclass
class Cluster:
    bases: list[str]
    worker: str
    url: str
    logs: list[Path]

    def log_errors(self) -> int:
        return sum(
            1 for log in self.logs for line in log.read_text(errors="replace").splitlines() if "Traceback" in line
        )


@contextmanager
def cluster(kind: str, url: str, tmp: Path, settings: dict[str, str]) -> Iterator[Cluster]:
    """SQLite: one server of two processes; PostgreSQL: two servers of one process each; and an echo worker."""
    worker_port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    bases, logs = [], []
    try:
        worker_env = server_env("http://unused", tmp)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.stitch_worker", str(worker_port), "--no-timings"],
                env=worker_env,
                cwd=ROOT,
            )
        )
        for workers in (2,) if kind == "SQLite" else (1, 1):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            log = tmp / f"soak-{port}.log"
            with log.open("wb") as sink:
                server = subprocess.Popen(
                    serve_command(port, url, workers), env=server_env(base, tmp, **settings), cwd=ROOT, stderr=sink
                )
            procs.append(server)
            try:
                wait_http(f"{base}/api/stitch/health", server)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; its log ends:\n{log.read_text()[-2000:]}") from None
            bases.append(base)
            logs.append(log)
        wait_http(f"http://127.0.0.1:{worker_port}/counts", procs[0])
        yield Cluster(bases, f"http://127.0.0.1:{worker_port}", url, logs)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def create_flow(base: str, worker: str) -> str:
    nodes = [
        {"id": f"step{i}", "type": "Worker", "data": {"webhookUrl": f"{worker}/work", "last": i == CHAIN - 1}}
        for i in range(CHAIN)
    ]
    edges = [{"id": f"e{i}", "source": f"step{i}", "target": f"step{i + 1}"} for i in range(CHAIN - 1)]
    reply = httpx.post(f"{base}/api/stitch/flows", json={"name": "soak", "graph": {"nodes": nodes, "edges": edges}})
    reply.raise_for_status()
    return str(reply.json()["id"])


def retention_settings(keep: float, every: float) -> dict[str, str]:
    return {
        "STITCH_RETENTION_MAX_AGE_SECONDS": f"{keep:g}",
        "STITCH_RETENTION_MAX_RUNS_PER_FLOW": "0",
        "STITCH_RETENTION_INTERVAL_SECONDS": f"{every:g}",
    }


# -- the database, sampled -----------------------------------------------------------------------
def database_size(url: str) -> tuple[int, int]:
    """Bytes on disk, and of those the write-ahead log's (SQLite's WAL file; 0 on PostgreSQL)."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        with sqlite3.connect(path, timeout=30) as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        main, wal = (os.path.getsize(p) if os.path.exists(p) else 0 for p in (path, f"{path}-wal"))
        return main + wal, wal
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]), 0  # type: ignore[index]


def present(url: str, run_ids: list[str]) -> set[str]:
    """Which of these runs are still in the database."""
    found: set[str] = set()
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" if url.startswith("sqlite") else "%s" for _ in chunk)
        query = f"SELECT id FROM stitch_runs WHERE id IN ({marks})"  # marks only, values bound
        if url.startswith("sqlite:///"):
            with sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30) as conn:
                found.update(row[0] for row in conn.execute(query, chunk))
        else:
            with psycopg.connect(url) as conn:
                found.update(str(row[0]) for row in conn.execute(query, chunk))  # type: ignore[arg-type]
    return found


def stuck(url: str, run_ids: list[str]) -> list[dict[str, Any]]:
    """What the database holds of runs that never finished: their status, node states and outbox rows."""
    sqlite = url.startswith("sqlite:///")
    mark = "?" if sqlite else "%s"
    found: list[dict[str, Any]] = []
    conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30) if sqlite else psycopg.connect(url)
    with conn:
        for run_id in run_ids:
            row = conn.execute(f"SELECT status, node_states FROM stitch_runs WHERE id = {mark}", (run_id,)).fetchone()
            if row is None:
                found.append({"run": run_id, "status": "gone"})
                continue
            states = row[1] if isinstance(row[1], dict) else json.loads(row[1])
            outbox = conn.execute(
                f"SELECT node_key, attempt, state, tries, last_error FROM stitch_outbox WHERE run_id = {mark}",
                (run_id,),
            ).fetchall()
            found.append(
                {
                    "run": run_id,
                    "status": row[0],
                    "nodes": {key: state.get("status") for key, state in states.items()},
                    "outbox": [list(r) for r in outbox],
                }
            )
    return found


def scrape(bases: list[str]) -> dict[str, float]:
    """The soak's metrics, summed over the servers (each PostgreSQL server counts its own)."""
    wanted = {
        "stitch_runs_finished_total": "runs_finished",
        "stitch_node_completions_total": "completions",
        "stitch_pruned_rows_total": "pruned_rows",
        "stitch_callbacks_refused_total": "callbacks_refused",
        "stitch_callbacks_waiting": "callbacks_waiting",
        "stitch_server_processes": "server_processes",
    }
    totals = dict.fromkeys(wanted.values(), 0.0)
    backlog = 0.0
    for base in bases:
        text = httpx.get(f"{base}/metrics", timeout=30).raise_for_status().text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted:
                    totals[wanted[sample.name]] += sample.value
                elif sample.name == "stitch_dispatch_backlog":
                    backlog = max(backlog, sample.value)  # read from the one database by each server
    totals["dispatch_backlog"] = backlog
    return totals


# -- the load ----------------------------------------------------------------------------------
@dataclass
class Drive:
    started: dict[str, float] = field(default_factory=dict)  # run id -> when (monotonic)
    finished: dict[str, float] = field(default_factory=dict)
    start_errors: dict[str, int] = field(default_factory=dict)  # what a failed run start got -> how often
    unfinished_pruned: int = 0
    sizes: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds into the soak, bytes, WAL bytes)
    scrapes: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    drained: bool = False
    began: float = 0.0
    load_ended: float = 0.0

    def rate(self, since: float, until: float) -> float:
        """Completions per second between these moments (monotonic)."""
        runs = sum(1 for moment in self.finished.values() if since <= moment < until)
        return runs * CHAIN / (until - since)


async def drive(
    c: Cluster, flow_id: str, seconds: float, in_flight: int, *, watch: bool, scrape_metrics: bool
) -> Drive:
    """Keep ``in_flight`` runs going for ``seconds``, then let them finish. ``watch``: sample the
    database and look for unfinished runs pruned; ``scrape_metrics``: scrape /metrics."""
    d = Drive()
    clients = [httpx.AsyncClient(base_url=f"{b}/api/stitch", timeout=60) for b in c.bases]
    worker = httpx.AsyncClient(base_url=c.worker, timeout=60)
    turn = 0

    async def start() -> None:
        nonlocal turn
        turn += 1
        client = clients[turn % len(clients)]
        try:
            reply = await client.post(f"/flows/{flow_id}/runs", json={"input": {"n": turn}})
            if reply.status_code == 201:
                d.started[reply.json()["id"]] = time.monotonic()
                return
            got = f"HTTP {reply.status_code}: {reply.text[:120]}"
        except httpx.HTTPError as exc:
            got = type(exc).__name__
        d.start_errors[got] = d.start_errors.get(got, 0) + 1

    async def sample() -> None:
        while True:
            moment = time.monotonic() - d.began
            if watch:
                d.sizes.append((moment, *await asyncio.to_thread(database_size, c.url)))
                going = [r for r in list(d.started) if r not in d.finished]
                there = await asyncio.to_thread(present, c.url, going)
                d.unfinished_pruned += sum(1 for r in going if r not in there and r not in d.finished)
            if scrape_metrics:
                d.scrapes.append((moment, await asyncio.to_thread(scrape, c.bases)))
            await asyncio.sleep(SAMPLE)

    d.began = time.monotonic()
    sampler = asyncio.create_task(sample())
    try:
        await asyncio.gather(*(start() for _ in range(in_flight)))
        end = d.began + seconds
        while time.monotonic() < end:
            done = (await worker.get("/finished")).json()
            now = time.monotonic()
            for run_id in done:
                d.finished[run_id] = now
            if done:
                await asyncio.gather(*(start() for _ in done))
            await asyncio.sleep(0.05)
        d.load_ended = time.monotonic()
        drain_by = d.load_ended + 120
        while len(d.finished) < len(d.started) and time.monotonic() < drain_by:
            now = time.monotonic()
            for run_id in (await worker.get("/finished")).json():
                d.finished[run_id] = now
            await asyncio.sleep(0.1)
        d.drained = len(d.finished) >= len(d.started)
    finally:
        sampler.cancel()
        for client in [*clients, worker]:
            await client.aclose()
    return d


# -- the reads, timed from a process of their own ----------------------------------------------
def read_loop(bases: list[str], flow_id: str, seconds: float, out: Path) -> None:
    """Times the first page, the page after DEEP runs and /health in turn; writes them to ``out``."""
    clients = [httpx.Client(base_url=f"{b}/api/stitch", timeout=30) for b in bases]
    timings: list[tuple[float, str, float, int]] = []  # (seconds in, read, ms, status)
    depths: list[tuple[float, int]] = []  # (seconds in, runs before the deep page)
    cursor: str | None = None
    found_at = 0.0
    began = time.monotonic()
    turn = 0
    while time.monotonic() - began < seconds:
        turn += 1
        client = clients[turn % len(clients)]
        if time.monotonic() - found_at > SAMPLE:
            cursor, depth = deep_cursor(client, flow_id)
            depths.append((time.monotonic() - began, depth))
            found_at = time.monotonic()
        reads: list[tuple[str, str, dict[str, Any]]] = [
            ("first page", "/runs", {"flow_id": flow_id, "limit": PAGE}),
            ("health", "/health", {}),
        ]
        if cursor is not None:
            reads.insert(1, ("deep page", "/runs", {"flow_id": flow_id, "limit": PAGE, "cursor": cursor}))
        for name, path, params in reads:
            t0 = time.perf_counter()
            try:
                status = client.get(path, params=params).status_code
            except httpx.HTTPError:
                status = 0
            timings.append((time.monotonic() - began, name, (time.perf_counter() - t0) * 1000, status))
        time.sleep(0.05)
    out.write_text(json.dumps({"timings": timings, "depths": depths}))


def deep_cursor(client: httpx.Client, flow_id: str) -> tuple[str | None, int]:
    """The cursor after DEEP runs (or after as many as there are, less a page), and that depth."""
    cursor, depth = None, 0
    while depth < DEEP:
        params: dict[str, Any] = {"flow_id": flow_id, "limit": min(1000, DEEP - depth)}
        if cursor:
            params["cursor"] = cursor
        try:
            page = client.get("/runs", params=params).json()
        except (httpx.HTTPError, ValueError):
            return cursor, depth
        if page.get("next_cursor") is None:
            return cursor, depth
        cursor, depth = page["next_cursor"], depth + len(page["runs"])
    return cursor, depth


# -- one soak, one paired round ------------------------------------------------------------------
def soak(kind: str, tmp: Path) -> dict[str, Any]:
    with database(kind, tmp) as url, cluster(kind, url, tmp, retention_settings(KEEP, PRUNE_EVERY)) as c:
        flow_id = create_flow(c.bases[0], c.worker)
        out = tmp / f"reads-{kind}.json"
        reader = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.stitch_soak",
                "read",
                ",".join(c.bases),
                flow_id,
                str(SECONDS),
                str(out),
            ],
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
            },
            cwd=ROOT,
        )
        d = asyncio.run(drive(c, flow_id, SECONDS, IN_FLIGHT, watch=True, scrape_metrics=True))
        reader.wait(timeout=120)
        time.sleep(2)  # the sent marks of the last webhooks
        final = scrape(c.bases)
        all_ids = list(d.started)
        there = present(url, all_ids)
        pruned = [r for r in all_ids if r not in there]
        unfinished_pruned = d.unfinished_pruned + sum(1 for r in pruned if r not in d.finished)
        counts = httpx.get(f"{c.worker}/counts").json()
        log_errors = c.log_errors()
        unfinished = [r for r in all_ids if r not in d.finished]
        if unfinished:
            print(f"{kind}: {len(unfinished)} runs unfinished; the worker: {json.dumps(counts)}", file=sys.stderr)
            for run in stuck(url, unfinished[:20]):
                print(f"  {json.dumps(run)}", file=sys.stderr)
    reads = json.loads(out.read_text())
    return summarise(kind, d, reads, final, counts, len(pruned), unfinished_pruned, log_errors)


def summarise(
    kind: str,
    d: Drive,
    reads: dict[str, Any],
    final: dict[str, float],
    counts: dict[str, int],
    pruned: int,
    unfinished_pruned: int,
    log_errors: int,
) -> dict[str, Any]:
    warm = min(30.0, SECONDS / 5)  # servers and first runs settling
    timed: dict[str, list[float]] = {}
    read_errors = 0
    for moment, name, ms, status in reads["timings"]:
        if status != 200:
            read_errors += 1
        elif moment >= warm:
            timed.setdefault(name, []).append(ms)
    window = min(STEADY_WINDOW, SECONDS / 2)
    last = [size for moment, size, _ in d.sizes if moment >= SECONDS - window]
    middle = statistics.median(last) if last else 0
    spread = max(abs(s - middle) / middle for s in last) if last and middle else 0.0
    moved = {
        key: len(d.scrapes) > 1 and d.scrapes[-1][1][key] > d.scrapes[0][1][key]
        for key in ("runs_finished", "completions", "pruned_rows")
    }
    error_kinds = {
        **{f"run starts ({got})": count for got, count in d.start_errors.items()},
        "callbacks": counts["errors"],
        "reads": read_errors,
        "runs unfinished": 0 if d.drained else len(d.started) - len(d.finished),
    }
    errors = sum(error_kinds.values())
    return {
        "kind": kind,
        "rate": d.rate(d.began + warm, d.load_ended),
        "runs": len(d.started),
        "pruned": pruned,
        "unfinished_pruned": unfinished_pruned,
        "sizes": d.sizes,
        "size_spread": spread,
        "size_window": window,
        "size_median": middle,
        "reads": {name: (percentile(ms, 50), percentile(ms, 95), len(ms)) for name, ms in timed.items()},
        "deep_min": min([depth for moment, depth in reads["depths"] if moment >= min(KEEP, SECONDS / 2)] or [0]),
        "moved": moved,
        "final": final,
        "scrapes": len(d.scrapes),
        "servers": max((s["server_processes"] for _, s in d.scrapes), default=0),
        "errors": errors,
        "error_kinds": {kind: count for kind, count in error_kinds.items() if count},
        "log_errors": log_errors,
        "retried_503": counts["retried_503"],
    }


def paired_round(kind: str, tmp: Path, on: bool) -> float:
    settings = retention_settings(PAIRED_KEEP, 5) if on else {"STITCH_RETENTION_ENABLED": "false"}
    with database(kind, tmp) as url, cluster(kind, url, tmp, settings) as c:
        flow_id = create_flow(c.bases[0], c.worker)
        d = asyncio.run(drive(c, flow_id, PAIRED_SECONDS, IN_FLIGHT, watch=False, scrape_metrics=on))
    warm = min(10.0, PAIRED_SECONDS / 4)
    return d.rate(d.began + warm, d.load_ended)


# -- the report --------------------------------------------------------------------------------
def mb(size: float) -> str:
    return f"{size / 2**20:.1f}"


@contextmanager
def autovacuum_on() -> Iterator[str]:
    """PostgreSQL's autovacuum on for the soak, as it is by default: Stitch relies on it to reuse the
    space of pruned rows (docs/stitch-operations.md). A server configured without it gets it turned on
    (ALTER SYSTEM) for the soak's duration and back off after; what was done is yielded, for the report."""
    if "PostgreSQL" not in KINDS:
        yield ""
        return
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        was = conn.execute("SHOW autovacuum").fetchone()[0]  # type: ignore[index]
        if was != "on":
            conn.execute("ALTER SYSTEM SET autovacuum = on")
            conn.execute("SELECT pg_reload_conf()")
    try:
        yield (
            "PostgreSQL's autovacuum was on, with its default settings."
            if was == "on"
            else "This machine's PostgreSQL had autovacuum off; the soak turned it on (ALTER SYSTEM, its default "
            "settings) for its duration and back off after: Stitch relies on it to reuse pruned rows' space."
        )
    finally:
        if was != "on":
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM RESET autovacuum")
                conn.execute("SELECT pg_reload_conf()")


def main() -> None:
    soaks: list[dict[str, Any]] = []
    paired: dict[str, dict[bool, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, autovacuum_on() as vacuum:
        for kind in KINDS:
            s = soak(kind, Path(tmp))
            soaks.append(s)
            print(f"{kind} soak: {json.dumps({k: v for k, v in s.items() if k != 'sizes'})}", file=sys.stderr)
        for kind in KINDS:
            for round_ in range(PAIRED_ROUNDS):
                for on in (True, False) if round_ % 2 == 0 else (False, True):
                    rate = paired_round(kind, Path(tmp), on)
                    paired.setdefault(kind, {}).setdefault(on, []).append(rate)
                    print(f"{kind} round {round_ + 1} {'on' if on else 'off'}: {rate:.0f}/s", file=sys.stderr)
    body = report(soaks, paired) + ("\n\n" + vacuum if vacuum else "")
    print(body)
    write_section("Stitch soak", body, "python -m benchmarks stitch-soak")


def report(soaks: list[dict[str, Any]], paired: dict[str, dict[bool, list[float]]]) -> str:
    lines = [
        f"{SECONDS:g} s per database at the highest sustained rate: {IN_FLIGHT} runs of a {CHAIN}-Worker chain "
        "always in flight (a finished run is replaced at once) against one echo-worker process, all on this "
        f"machine. Retention keeps finished runs {KEEP:g} s and prunes every {PRUNE_EVERY:g} s. SQLite: one "
        "`agentloom stitch serve --workers 2`; PostgreSQL: two `agentloom stitch serve` (one process each) on "
        "one database, runs started and reads made on both in turn. A separate process times the reads in "
        f"turn, without pause but 50 ms per round: the first page of the flow's runs ({PAGE}), the page after "
        f"{DEEP:,} runs (by cursor) and `/health`; percentiles from {min(30.0, SECONDS / 5):g} s on. The "
        f"database size is sampled every {SAMPLE:g} s (SQLite: file and WAL after a passive checkpoint; "
        "PostgreSQL: `pg_database_size`); steady means within +-15 % of its median over the last "
        f"{min(STEADY_WINDOW, SECONDS / 2):g} s. `/metrics` is scraped every {SAMPLE:g} s and parsed with "
        "`prometheus_client.parser`; backlog is read once more after the load stopped and drained.",
        "",
        "| database | completions/s | runs | pruned | unfinished pruned | DB size (MB, median last window) | "
        "size within | first page p50/p95 (ms) | deep page p50/p95 (ms) | /health p50/p95 (ms) | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in soaks:

        def shown(name: str, s: dict[str, Any] = s) -> str:
            if name not in s["reads"]:
                return "not measured"
            p50, p95, _ = s["reads"][name]
            mark = "**" if p95 <= READ_GOAL_MS else "**over** "
            return f"{p50:.1f} / {mark}{p95:.1f}{'**' if p95 <= READ_GOAL_MS else ''}"

        lines.append(
            f"| {s['kind']} | {s['rate']:.0f} | {s['runs']:,} | {s['pruned']:,} | {s['unfinished_pruned']} | "
            f"{mb(s['size_median'])} | {'**over** ' if s['size_spread'] > STEADY_BAND else ''}"
            f"+-{s['size_spread'] * 100:.1f} % | {shown('first page')} | "
            f"{shown('deep page')} | {shown('health')} | {s['errors'] + s['log_errors']}"
            + "".join(f"; {kind}: {count}" for kind, count in s.get("error_kinds", {}).items())
            + (f"; server log tracebacks: {s['log_errors']}" if s["log_errors"] else "")
            + " |"
        )
    lines += [
        "",
        f"Goals: reads p95 <= {READ_GOAL_MS:g} ms; size within +-15 %; no unfinished run pruned; 0 errors (a start, "
        "read or callback not answered 2xx, a run that never finished, a traceback in a server log; a callback "
        "answered 503 with Retry-After and retried is not an error, and is counted below). The deep page is "
        f"the one after {DEEP:,} runs, or after as many as the flow had; below, the fewest it had once the soak "
        f"had run {min(KEEP, SECONDS / 2):g} s (fewer than {DEEP:,}: the rate keeps fewer in {KEEP:g} s).",
        "",
        "| database | deep page after (runs) | scrapes | server processes | counters moved (runs finished, "
        "completions, pruned rows) | after the drain: dispatch backlog, callbacks waiting | callbacks retried "
        "after 503 |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in soaks:
        moved = ", ".join("yes" if s["moved"][k] else "**no**" for k in ("runs_finished", "completions", "pruned_rows"))
        final = s["final"]
        lines.append(
            f"| {s['kind']} | {s['deep_min']:,} | {s['scrapes']} | {s['servers']:g} | {moved} | "
            f"{final['dispatch_backlog']:g}, {final['callbacks_waiting']:g} | {s['retried_503']} |"
        )
    lines += [
        "",
        "Database size over the soak (MB, every sample):",
        "",
    ]
    for s in soaks:
        lines.append(f"- {s['kind']}: " + " ".join(mb(size) for _, size, _ in s["sizes"]))
        if any(wal for _, _, wal in s["sizes"]):
            lines.append(f"- {s['kind']}, of which the WAL: " + " ".join(mb(wal) for _, _, wal in s["sizes"]))
    lines += [
        "",
        f"Retention and metrics on vs off: {PAIRED_ROUNDS} rounds of {PAIRED_SECONDS:g} s per setting, "
        "alternating (on, off, then off, on, ...), each on a fresh database and servers, the same closed "
        f"loop; on: retention keeping {PAIRED_KEEP:g} s and pruning every 5 s (so it deletes through most "
        f"of a round) and `/metrics` scraped every {SAMPLE:g} s; off: `STITCH_RETENTION_ENABLED=false` "
        "and no scrape (the counters are always kept). Completions/s from the round's "
        f"{min(10.0, PAIRED_SECONDS / 4):g} s on; medians.",
        "",
        "| database | on (completions/s) | off (completions/s) | ratio | goal |",
        "|---|---|---|---|---|",
    ]
    for kind, rates in paired.items():
        on, off = statistics.median(rates[True]), statistics.median(rates[False])
        lines.append(
            f"| {kind} | {on:.0f} ({', '.join(f'{r:.0f}' for r in rates[True])}) | "
            f"{off:.0f} ({', '.join(f'{r:.0f}' for r in rates[False])}) | **{on / off:.2f}x** | >= {RATE_GOAL}x |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["read"]:
        bases, flow, seconds, out = sys.argv[2:6]
        read_loop(bases.split(","), flow, float(seconds), Path(out))
    else:
        main()
