"""Stitch against its floor: Worker-node completions per second with a local echo worker, on SQLite and
on PostgreSQL, as a ratio to the floor engine (benchmarks/stitch_floor.py) measured in the same run,
and the latency from a worker's callback to the next node's webhook.

Each measurement gets a fresh database, a fresh server (`agentloom stitch serve`, one or two
processes, or the floor) and an echo worker process. RUNS runs of a CHAIN-node Worker chain go at
once. The floor, Stitch with one server process (as the floor) and with two alternate for ROUNDS
rounds, so a machine that slows down mid-run slows all; the medians are reported. Goals: Stitch >=
0.4x the floor on SQLite and >= 0.8x on PostgreSQL; quiet callback-to-next-webhook p50 <= 2 ms on
SQLite, <= 4 ms on PostgreSQL. Then a scale-out row on PostgreSQL: 1, 2 (the medians above) and 4
server processes.

Then reads during a callback burst (`python -m benchmarks stitch-burst`, also run by stitch):
BURST_RUNS runs of the chain started at once on `agentloom stitch serve --workers 2`, and a client
timing the reads a person makes (the flow's first page of runs, one run, /health) while the
callbacks pour in, against the same reads on the idle server just before. Goal: reads p95 <= 150 ms
(the limit tests/stitch/test_steady_reads.py held before it asserted behaviour only).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

from benchmarks.report import percentile, write_section

ROOT = Path(__file__).resolve().parent.parent
CHAIN = 10
RUNS = int(os.environ.get("STITCH_BENCH_RUNS", 40))
ROUNDS = int(os.environ.get("STITCH_BENCH_ROUNDS", 5))
PG_ADMIN = os.environ.get("STITCH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
GOALS = {"SQLite": (0.4, 2.0), "PostgreSQL": (0.8, 4.0)}  # ratio to the floor, quiet p50 ms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up") from None
            time.sleep(0.1)


def gaps_of(stats: dict[str, dict[str, float]], runs: list[str]) -> list[float]:
    """Worker's callback sent for step i -> webhook received for step i+1."""
    return [
        stats["received"][f"{r}/step{i + 1}"] - stats["answered"][f"{r}/step{i}"]
        for r in runs
        for i in range(CHAIN - 1)
    ]


class Stitch:
    """Drives `agentloom stitch serve` through its API."""

    def __init__(self, base: str) -> None:
        self.api = httpx.Client(base_url=f"{base}/api/stitch", timeout=60)
        self.health = f"{base}/api/stitch/health"

    def prepare(self, webhook: str) -> None:
        nodes = [{"id": f"step{i}", "type": "Worker", "data": {"webhookUrl": webhook}} for i in range(CHAIN)]
        edges = [{"id": f"e{i}", "source": f"step{i}", "target": f"step{i + 1}"} for i in range(CHAIN - 1)]
        self.flow_id = self.api.post(
            "/flows", json={"name": "chain", "graph": {"nodes": nodes, "edges": edges}}
        ).json()["id"]

    def start(self, n: int) -> str:
        return self.api.post(f"/flows/{self.flow_id}/runs", json={"input": {"n": n}}).json()["id"]  # type: ignore[no-any-return]

    def wait(self, runs: list[str]) -> None:
        wanted = set(runs)

        def done() -> bool:
            statuses = {r["id"]: r["status"] for r in self._listing()}
            if any(statuses.get(r) == "failed" for r in wanted):
                raise RuntimeError("a run failed")
            return all(statuses.get(r) == "completed" for r in wanted)

        poll(done)

    def _listing(self) -> list[dict]:  # type: ignore[type-arg]
        page = self.api.get("/runs", params={"flow_id": self.flow_id, "limit": 1000}).json()
        if isinstance(page, dict):  # a page object: its list of runs
            return next(v for v in page.values() if isinstance(v, list))
        return page  # type: ignore[no-any-return]


class Floor:
    """Drives benchmarks/stitch_floor.py."""

    def __init__(self, base: str) -> None:
        self.api = httpx.Client(base_url=base, timeout=60)
        self.health = f"{base}/done"
        self.completed = 0

    def prepare(self, webhook: str) -> None:
        pass

    def start(self, n: int) -> str:
        return self.api.post("/start", json={"input": {"n": n}}).json()["id"]  # type: ignore[no-any-return]

    def wait(self, runs: list[str]) -> None:
        target = self.completed + len(runs)
        poll(lambda: self.api.get("/done").json()["completed"] >= target)
        self.completed = target


def poll(done: Callable[[], bool]) -> None:
    """One light query per 50 ms, so polling does not steal the server's CPU."""
    deadline = time.monotonic() + 600
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("runs did not finish in 10 minutes")
        time.sleep(0.05)


def server_env(base: str, tmp: Path, **settings: str) -> dict[str, str]:
    """The environment of a benchmark's server and worker: none of the caller's STITCH_ or AGENTLOOM_
    variables, the server's base URL, a data dir in ``tmp`` and ``settings`` (STITCH_* values)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STITCH_", "AGENTLOOM_"))}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)  # and the caller's
    env.update(
        STITCH_BASE_URL=base, AGENTLOOM_DATA_DIR=str(tmp / "data"), AGENTLOOM_LOG_LEVEL="WARNING", PYTHONPATH=path
    )
    env.update(settings)
    return env


def serve_command(port: int, database_url: str, workers: int = 1) -> list[str]:
    """`agentloom stitch serve` on ``port`` with ``workers`` processes."""
    return [
        str(Path(sys.executable).with_name("agentloom")),
        "stitch",
        "serve",
        "--port",
        str(port),
        "--database",
        database_url,
        "--workers",
        str(workers),
    ]


def measure(engine: str, database_url: str, tmp: Path, workers: int = 1) -> dict[str, float]:
    port, worker_port = free_port(), free_port()
    base, webhook = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{worker_port}/work"
    env = server_env(base, tmp)
    if engine == "stitch":
        command = serve_command(port, database_url, workers)
        client: Stitch | Floor = Stitch(base)
    else:
        floor_db = database_url if database_url.startswith("postgres") else database_url.removeprefix("sqlite:///")
        command = [sys.executable, "-m", "benchmarks.stitch_floor", str(port), floor_db, webhook]
        client = Floor(base)
    log = tmp / f"{engine}-{port}.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(command, env=env, cwd=ROOT, stderr=sink)
    worker = subprocess.Popen([sys.executable, "-m", "benchmarks.stitch_worker", str(worker_port)], env=env, cwd=ROOT)
    try:
        try:
            wait_http(client.health, server)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; its log ends:\n{log.read_text()[-2000:]}") from None
        wait_http(f"http://127.0.0.1:{worker_port}/stats", worker)
        client.prepare(webhook)
        client.wait([client.start(-1)])  # warm-up
        httpx.post(f"http://127.0.0.1:{worker_port}/reset")
        pids = {"server": server.pid, "worker": worker.pid}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.perf_counter()
        runs = [client.start(i) for i in range(RUNS)]
        client.wait(runs)
        elapsed = time.perf_counter() - started
        cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        loaded = gaps_of(httpx.get(f"http://127.0.0.1:{worker_port}/stats").json(), runs)
        alone = []  # one run at a time: the engine's own latency, without a queue in front of it
        for i in range(10):
            run_id = client.start(i)
            client.wait([run_id])
            alone.append(run_id)
        quiet = gaps_of(httpx.get(f"http://127.0.0.1:{worker_port}/stats").json(), alone)
        completions = RUNS * CHAIN
        return {
            "throughput": completions / elapsed,
            "p50": percentile(quiet, 50) * 1000,
            "p95": percentile(quiet, 95) * 1000,
            "loaded_p50": percentile(loaded, 50) * 1000,
            "loaded_p95": percentile(loaded, 95) * 1000,
            "elapsed": elapsed,
            "server_cpu": cpu["server"] / elapsed,
            "worker_cpu": cpu["worker"] / elapsed,
            "cpu_ms": cpu["server"] / completions * 1000,
        }
    finally:
        for proc in (server, worker):
            proc.terminate()
            proc.wait(timeout=20)


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and its children that are still running (uvicorn's worker processes)."""
    total = 0.0
    for child in [pid, *_children(pid)]:
        fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_children(int(child))]
    return found


@contextmanager
def database(kind: str, tmp: Path) -> Iterator[str]:
    """A fresh, empty database of this kind."""
    name = f"stitch_bench_{uuid.uuid4().hex[:8]}"
    if kind == "SQLite":
        yield f"sqlite:///{tmp}/{name}.db"
        return
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


ENGINES = (("floor", 1), ("stitch", 1), ("stitch", 2))


def label(engine: str, workers: int) -> str:
    return "floor" if engine == "floor" else f"Stitch, {workers} process{'es' if workers > 1 else ''}"


def med(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def main() -> None:
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in GOALS:
            for round_ in range(ROUNDS):
                for engine, workers in ENGINES:  # interleaved: a slower minute hits all of them
                    with database(kind, Path(tmp)) as url:
                        m = measure(engine, url, Path(tmp), workers)
                    results.setdefault((kind, label(engine, workers)), []).append(m)
                    print(
                        f"{kind} round {round_ + 1} {label(engine, workers)}: {m['throughput']:.0f}/s, quiet p50 "
                        f"{m['p50']:.2f} ms, {m['cpu_ms']:.2f} ms CPU per completion",
                        file=sys.stderr,
                    )
        with database("PostgreSQL", Path(tmp)) as url:  # 1 and 2 processes: the rows above
            four = measure("stitch", url, Path(tmp), 4)
    lines = [
        f"{RUNS} runs of a {CHAIN}-Worker chain at once ({RUNS * CHAIN} completions) against one echo-worker process, "
        "all on this machine; a completion is webhook out, callback in, state committed, next webhook out. "
        "The floor (`benchmarks/stitch_floor.py`) is the least an honest engine does per completion: one "
        "transaction (check attempt and state, store the output, append an event, mark the next node), an "
        "HMAC-signed callback URL, the webhook through a pooled aiohttp client, the callback through uvicorn and a "
        "bare ASGI callable, one process, one connection. Stitch runs `agentloom stitch serve`, with one server "
        "process (as the floor) and with two (`--workers 2`). The floor and both alternate for "
        f"{ROUNDS} rounds per database, each on a fresh database; medians shown. Latency: "
        "from the worker sending its callback to the next node's webhook arriving, one run at a time (quiet) and "
        "during the throughput run (loaded, mostly time queued behind the other runs). CPU per completion: the "
        "server processes' CPU time during the throughput run / completions.",
        "",
        "| database | engine | completions/s | ratio to floor | goal | p50 quiet (ms) | goal | p95 quiet (ms) | p50 "
        "loaded (ms) | CPU per completion (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, (ratio_goal, p50_goal) in GOALS.items():
        floor = results[(kind, "floor")]
        for engine, workers in ENGINES:
            rs, mine = results[(kind, label(engine, workers))], engine == "stitch"
            ratio = med(rs, "throughput") / med(floor, "throughput")
            lines.append(
                f"| {kind} | {label(engine, workers)} | {med(rs, 'throughput'):.0f} | "
                + (f"**{ratio:.2f}x** | >= {ratio_goal}x" if mine else "1 | ")
                + f" | **{med(rs, 'p50'):.2f}** | "
                + (f"<= {p50_goal:g}" if mine else "")
                + f" | {med(rs, 'p95'):.2f} | {med(rs, 'loaded_p50'):.1f} | {med(rs, 'cpu_ms'):.2f} |"
            )
    pg_floor = med(results[("PostgreSQL", "floor")], "throughput")
    lines += [
        "",
        "Scale-out: Stitch on one PostgreSQL database with N server processes, any of them taking any callback "
        "(1 and 2: the medians above; 4: one measurement).",
        "",
        "| server processes | completions/s | ratio to the PostgreSQL floor | p50 loaded (ms) | server CPU (cores) | "
        "CPU per completion (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for workers in (1, 2, 4):
        rs = results[("PostgreSQL", label("stitch", workers))] if workers < 4 else [four]
        lines.append(
            f"| {workers} | {med(rs, 'throughput'):.0f} | {med(rs, 'throughput') / pg_floor:.2f}x | "
            f"{med(rs, 'loaded_p50'):.1f} | {med(rs, 'server_cpu'):.2f} | {med(rs, 'cpu_ms'):.2f} |"
        )
    lines += [
        "",
        f"On {os.cpu_count()} cores the curve flattens once the server processes, the echo worker and "
        "PostgreSQL together use every core: more processes then only add context switches. What limits one "
        "database is written in docs/stitch-operations.md.",
    ]
    body = "\n".join(lines)
    print(body)
    write_section("Stitch", body, "python -m benchmarks stitch")
    burst_main()
    from benchmarks import stitch_fanout  # it reuses this module's helpers

    stitch_fanout.main()


BURST_RUNS = int(os.environ.get("STITCH_BURST_RUNS", 300))
BURST_ROUNDS = int(os.environ.get("STITCH_BURST_ROUNDS", 3))
BURST_GOAL_MS = 150.0  # reads p95 while the callbacks pour in
READS = ("first page", "run", "health")


def burst(database_url: str, tmp: Path) -> dict[str, dict[str, list[float]] | float]:
    """Reads (ms) on the idle server, then while BURST_RUNS chains started at once are called back;
    and the seconds their BURST_RUNS * CHAIN callbacks took to drain."""
    port, worker_port = free_port(), free_port()
    base, worker = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{worker_port}"
    env = server_env(base, tmp)
    with (tmp / f"burst-{port}.log").open("wb") as sink:
        server = subprocess.Popen(serve_command(port, database_url, 2), env=env, cwd=ROOT, stderr=sink)
    echo = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.stitch_worker", str(worker_port), "--no-timings"], env=env, cwd=ROOT
    )
    try:
        wait_http(f"{base}/api/stitch/health", server)
        wait_http(f"{worker}/counts", echo)
        stitch = Stitch(base)
        stitch.prepare(f"{worker}/work")
        first = stitch.start(-1)
        stitch.wait([first])  # a warm-up, and the run read below

        def callbacks() -> int:
            return int(httpx.get(f"{worker}/counts").json()["callbacks"])

        paths = {
            "first page": ("/runs", {"flow_id": stitch.flow_id, "limit": 50}),
            "run": (f"/runs/{first}", {}),
            "health": ("/health", {}),
        }
        quiet: dict[str, list[float]] = {name: [] for name in READS}
        loaded: dict[str, list[float]] = {name: [] for name in READS}
        with httpx.Client(base_url=f"{base}/api/stitch", timeout=30) as client:

            def read(into: dict[str, list[float]]) -> None:
                for name, (path, params) in paths.items():
                    began = time.perf_counter()
                    assert client.get(path, params=params).status_code == 200
                    into[name].append((time.perf_counter() - began) * 1000)
                time.sleep(0.02)

            for _ in range(30):
                read(quiet)
            before = callbacks()
            began = time.perf_counter()
            with ThreadPoolExecutor(16) as pool:  # a burst: BURST_RUNS runs in flight at once
                starts = [pool.submit(stitch.start, i) for i in range(BURST_RUNS)]
                while callbacks() < before + 0.9 * BURST_RUNS * CHAIN:  # until the backlog is all but gone
                    read(loaded)
                for start in starts:
                    start.result()
        deadline = time.monotonic() + 300
        while callbacks() < before + BURST_RUNS * CHAIN:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the burst did not drain: {httpx.get(f'{worker}/counts').json()}")
            time.sleep(0.05)
        drained = time.perf_counter() - began
        if (counts := httpx.get(f"{worker}/counts").json())["errors"]:
            raise RuntimeError(f"callbacks failed: {counts}")
        return {"quiet": quiet, "loaded": loaded, "drained": drained}
    finally:
        for proc in (server, echo):
            proc.terminate()
            proc.wait(timeout=20)


def burst_main() -> None:
    load = os.getloadavg()[0]
    rows, drains = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in GOALS:
            quiet: dict[str, list[float]] = {name: [] for name in READS}
            loaded: dict[str, list[float]] = {name: [] for name in READS}
            drained = []
            for round_ in range(BURST_ROUNDS):
                with database(kind, Path(tmp)) as url:
                    got = burst(url, Path(tmp))
                for pooled, key in ((quiet, "quiet"), (loaded, "loaded")):
                    for name in READS:
                        pooled[name] += got[key][name]  # type: ignore[index]
                drained.append(float(got["drained"]))  # type: ignore[arg-type]
                print(f"{kind} burst {round_ + 1}: drained in {drained[-1]:.1f} s", file=sys.stderr)
            for name in READS:
                q95, l95 = percentile(quiet[name], 95), percentile(loaded[name], 95)
                rows.append(
                    f"| {kind} | {name} | {percentile(quiet[name], 50):.1f} / {q95:.1f} | "
                    f"{percentile(loaded[name], 50):.1f} / **{l95:.1f}** / {max(loaded[name]):.1f} | "
                    f"{len(loaded[name])} | {l95 / q95:.1f}x | <= {BURST_GOAL_MS:g} |"
                )
            drains.append(f"{kind} {statistics.median(drained):.1f} s")
    body = "\n".join(
        [
            f"{BURST_RUNS} runs of a {CHAIN}-Worker chain started at once (16 at a time) on one `agentloom stitch "
            f"serve --workers 2`, one echo-worker process, all on this machine: {BURST_RUNS * CHAIN:,} callbacks "
            "pour in. Meanwhile one client reads in turn, 20 ms apart, what a person watching does: the flow's "
            "first page of runs (50), one run, `/health`; timed from the burst's first start until 90 % of the "
            "callbacks were answered. Quiet: the same reads on the same server just before the burst (30 of each). "
            f"{BURST_ROUNDS} rounds per database, each on a fresh database and server; reads pooled. Load average "
            f"(1 min) {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores.",
            "",
            "| database | read | quiet p50 / p95 (ms) | during the burst p50 / p95 / max (ms) | reads | p95 vs quiet "
            "| goal p95 (ms) |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Every callback answered (the burst drained), median: {', '.join(drains)}.",
        ]
    )
    print(body)
    write_section("Stitch: reads during a callback burst", body, "python -m benchmarks stitch-burst")


if __name__ == "__main__":
    main()
