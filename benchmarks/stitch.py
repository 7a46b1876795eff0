"""Stitch: Worker-node completions per second with a local echo worker, on SQLite and on
PostgreSQL, and the latency from a worker's callback to the next node's webhook.

Each database gets a fresh server process (`agentloom stitch serve`) and an echo worker
process. RUNS runs of a CHAIN-node Worker chain go at once. Goals on 2 cores: >= 300
completions/s on SQLite, >= 200/s on PostgreSQL, callback-to-next-dispatch p50 <= 10 ms.
Calibration: n8n reports up to 220 executions/s on one instance.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg

from benchmarks.report import percentile, write_section

ROOT = Path(__file__).resolve().parent.parent
CHAIN = 10
RUNS = int(os.environ.get("STITCH_BENCH_RUNS", 40))
PG_ADMIN = os.environ.get("STITCH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


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
    return [stats["received"][f"{r}/step{i + 1}"] - stats["answered"][f"{r}/step{i}"] for r in runs for i in range(CHAIN - 1)]


def measure(database_url: str, tmp: Path, workers: int) -> dict[str, float]:
    port, worker_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STITCH_", "AGENTLOOM_"))}
    env.update(STITCH_BASE_URL=base, AGENTLOOM_DATA_DIR=str(tmp / "data"), AGENTLOOM_LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    command = [str(Path(sys.executable).with_name("agentloom")), "stitch", "serve", "--port", str(port),
               "--database", database_url, "--workers", str(workers)]
    server = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([sys.executable, "-m", "benchmarks.stitch_worker", str(worker_port)], env=env, cwd=ROOT)
    try:
        wait_http(f"{base}/api/stitch/health", server)
        wait_http(f"http://127.0.0.1:{worker_port}/stats", worker)
        api = httpx.Client(base_url=f"{base}/api/stitch", timeout=60)
        nodes = [{"id": f"step{i}", "type": "Worker", "data": {"webhookUrl": f"http://127.0.0.1:{worker_port}/work"}} for i in range(CHAIN)]
        edges = [{"id": f"e{i}", "source": f"step{i}", "target": f"step{i + 1}"} for i in range(CHAIN - 1)]
        flow_id = api.post("/flows", json={"name": "chain", "graph": {"nodes": nodes, "edges": edges}}).json()["id"]
        warm = api.post(f"/flows/{flow_id}/runs", json={"input": {"n": -1}}).json()["id"]
        wait_done(api, [warm])
        httpx.post(f"http://127.0.0.1:{worker_port}/reset")
        pids = {"server": server.pid, "worker": worker.pid}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        started = time.perf_counter()
        runs = [api.post(f"/flows/{flow_id}/runs", json={"input": {"n": i}}).json()["id"] for i in range(RUNS)]
        wait_done(api, runs)
        elapsed = time.perf_counter() - started
        cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        loaded = gaps_of(httpx.get(f"http://127.0.0.1:{worker_port}/stats").json(), runs)
        alone = []  # one run at a time: the engine's own latency, without a queue in front of it
        for i in range(10):
            run_id = api.post(f"/flows/{flow_id}/runs", json={"input": {"n": i}}).json()["id"]
            wait_done(api, [run_id])
            alone.append(run_id)
        quiet = gaps_of(httpx.get(f"http://127.0.0.1:{worker_port}/stats").json(), alone)
        return {"throughput": RUNS * CHAIN / elapsed, "p50": percentile(quiet, 50) * 1000, "p95": percentile(quiet, 95) * 1000,
                "loaded_p50": percentile(loaded, 50) * 1000, "loaded_p95": percentile(loaded, 95) * 1000,
                "elapsed": elapsed, "server_cpu": cpu["server"] / elapsed, "worker_cpu": cpu["worker"] / elapsed}
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


def wait_done(api: httpx.Client, runs: list[str]) -> None:
    """One light listing per 50 ms, so polling does not steal the server's CPU."""
    flow_id = api.get(f"/runs/{runs[0]}").json()["flow_id"]
    wanted = set(runs)
    deadline = time.monotonic() + 600
    while True:
        statuses = {r["id"]: r["status"] for r in api.get("/runs", params={"flow_id": flow_id, "limit": 1000}).json()}
        if any(statuses.get(r) == "failed" for r in wanted):
            raise RuntimeError("a run failed")
        if all(statuses.get(r) == "completed" for r in wanted):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("runs did not finish in 10 minutes")
        time.sleep(0.05)


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # Two server processes, one per core: HTTP work runs in parallel; SQLite writes queue
        # one at a time, PostgreSQL's lock per run.
        rows.append(("SQLite", 2, measure(f"sqlite:///{tmp}/stitch.db", Path(tmp), 2), 300))
        name = f"stitch_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            rows.append(("PostgreSQL 15", 2, measure(PG_ADMIN.rsplit("/", 1)[0] + "/" + name, Path(tmp), 2), 200))
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    lines = [
        f"Throughput: {RUNS} runs of a {CHAIN}-Worker chain at once ({RUNS * CHAIN} completions) against "
        "`agentloom stitch serve --workers N` and one echo-worker process, all on this machine. A completion is "
        "webhook out, callback in, state committed, next webhook out. Latency: from the worker sending its callback "
        "to the next node's webhook arriving, measured one run at a time (quiet) and during the throughput run "
        "(loaded, where it is mostly time queued behind the other 39 runs).",
        "",
        "| database | server processes | completions/s | goal | latency p50 quiet (ms) | p95 quiet (ms) | p50 loaded (ms) | goal p50 | server CPU (cores) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, workers, m, goal in rows:
        lines.append(f"| {name} | {workers} | **{m['throughput']:.0f}** | >= {goal} | **{m['p50']:.1f}** | {m['p95']:.1f} | "
                     f"{m['loaded_p50']:.1f} | <= 10 | {m['server_cpu']:.2f} |")
    lines += ["", "Calibration: n8n reports up to 220 executions/s on one instance; ratio to it: " +
              ", ".join(f"{name} {m['throughput'] / 220:.2f}x" for name, _, m, _ in rows) + "."]
    body = "\n".join(lines)
    print(body)
    write_section("Stitch", body, "python -m benchmarks stitch")


if __name__ == "__main__":
    main()
