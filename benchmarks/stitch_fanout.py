"""Wide fan-outs: one run of Splitter -> Worker -> Collector over 100, 1,000 and 2,000 elements, on SQLite
and PostgreSQL, per-path completion rate as a ratio to the 100-path run of the same round.

Per database: one `agentloom stitch serve` process and one echo worker (benchmarks/stitch_worker.py) serve
every width; each round runs 2,000 paths of every width (twenty 100-path runs one after the other, two of
1,000, one of 2,000), the widths alternating for ROUNDS rounds; the medians are reported. While each run goes,
a client reads the run's page (`GET /api/stitch/runs/{id}`, what the console shows) and the console's page
for it (`GET /runs/{id}`) one after the other, and their latencies are reported. Goal: 2,000 paths at
>= 0.8x the per-path rate of 100.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.report import percentile, write_section
from benchmarks.stitch import ROOT, database, free_port, serve_command, server_env, wait_http

WIDTHS = (100, 1000, 2000)
ROUNDS = int(os.environ.get("STITCH_FANOUT_ROUNDS", 3))
GOAL = 0.8


class Reader(threading.Thread):
    """Reads the run page and the console's page in turn while a run goes; their latencies in ms."""

    def __init__(self, base: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.base, self.run_id = base, run_id
        self.api: list[float] = []
        self.page: list[float] = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as client:
            while not self.stop.is_set():
                for path, sink in ((f"/api/stitch/runs/{self.run_id}", self.api), (f"/runs/{self.run_id}", self.page)):
                    started = time.perf_counter()
                    answer = client.get(path)
                    sink.append((time.perf_counter() - started) * 1000)
                    self.errors += answer.status_code != 200
                self.stop.wait(0.5)


def one_run(api: httpx.Client, base: str, flow_id: str, width: int, read: bool) -> tuple[float, Reader | None]:
    """Seconds from the start to the run's completion, and the reader that watched it."""
    started = time.perf_counter()
    run = api.post(f"/flows/{flow_id}/runs", json={"input": {"items": list(range(width))}})
    run.raise_for_status()
    run_id = run.json()["id"]
    reader = Reader(base, run_id) if read else None
    if reader:
        reader.start()
    deadline = time.monotonic() + 900
    while True:
        (newest,) = api.get("/runs", params={"flow_id": flow_id, "limit": 1}).json()["runs"]
        status = newest["status"] if newest["id"] == run_id else "missing"
        if status == "completed":
            break
        if status != "running" or time.monotonic() > deadline:
            raise RuntimeError(f"the {width}-path run is {status}")
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    if reader:
        reader.stop.set()
        reader.join()
    output = api.get(f"/runs/{run_id}").json()["node_states"]["gather"]["output"]
    if output != list(range(width)):
        raise RuntimeError(f"the {width}-path run gathered {len(output)} items, not its {width} in order")
    return elapsed, reader


def measure(kind: str, tmp: Path) -> tuple[dict[int, list[float]], Reader]:
    port, worker_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = server_env(base, tmp)
    with database(kind, tmp) as url:
        log = tmp / f"fanout-{port}.log"
        with log.open("wb") as sink:
            server = subprocess.Popen(serve_command(port, url), env=env, cwd=ROOT, stderr=sink)
        worker = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.stitch_worker", str(worker_port)], env=env, cwd=ROOT
        )
        try:
            wait_http(f"{base}/api/stitch/health", server)
            wait_http(f"http://127.0.0.1:{worker_port}/stats", worker)
            api = httpx.Client(base_url=f"{base}/api/stitch", timeout=60)
            graph = {
                "nodes": [
                    {"id": "split", "type": "Splitter", "data": {"arrayPath": "items"}},
                    {"id": "work", "type": "Worker", "data": {"webhookUrl": f"http://127.0.0.1:{worker_port}/work"}},
                    {"id": "gather", "type": "Collector", "data": {}},
                ],
                "edges": [
                    {"id": "a", "source": "split", "target": "work"},
                    {"id": "b", "source": "work", "target": "gather"},
                ],
            }
            flow_id = api.post("/flows", json={"name": "fan-out", "graph": graph}).json()["id"]
            one_run(api, base, flow_id, 50, read=False)  # warm-up
            times: dict[int, list[float]] = {w: [] for w in WIDTHS}
            watched: Reader | None = None
            for round_ in range(ROUNDS):
                for width in WIDTHS:
                    reps = WIDTHS[-1] // width  # as many paths at every width, one run after the other
                    runs = [one_run(api, base, flow_id, width, read=True) for _ in range(reps)]
                    elapsed, reader = sum(t for t, _ in runs) / reps, runs[0][1]
                    times[width].append(elapsed)
                    if width == WIDTHS[-1]:
                        watched = watched or reader
                    httpx.post(f"http://127.0.0.1:{worker_port}/reset")
                    print(f"{kind} round {round_ + 1}: {width} paths in {elapsed:.2f} s", file=sys.stderr)
            assert watched is not None
            return times, watched
        finally:
            for proc in (server, worker):
                proc.terminate()
                proc.wait(timeout=20)


def rows(kind: str, times: dict[int, list[float]], reader: Reader) -> list[str]:
    rate = {w: w / statistics.median(ts) for w, ts in times.items()}
    out = []
    for width in WIDTHS:
        ratio = rate[width] / rate[WIDTHS[0]]
        mark = f"**{ratio:.2f}x**" if width == WIDTHS[-1] else f"{ratio:.2f}x"
        out.append(
            f"| {kind} | {width:,} | {statistics.median(times[width]):.2f} | {rate[width]:.0f} | {mark} | "
            + (
                f"{percentile(reader.api, 50):.0f} / {percentile(reader.api, 95):.0f} / {max(reader.api):.0f} | "
                f"{percentile(reader.page, 95):.0f} | {reader.errors} |"
                if width == WIDTHS[-1]
                else " |  |  |"
            )
        )
    return out


def main() -> None:
    lines = [
        "One run of Splitter -> Worker -> Collector over N elements (each path: webhook out, the echo worker's "
        "callback in, state committed; the Collector gathers all N in order), one `agentloom stitch serve` process "
        f"and one echo worker per database; each round runs 2,000 paths of every width (twenty 100-path runs one "
        f"after the other, two of 1,000, one of 2,000), the widths alternating for {ROUNDS} rounds; medians of the "
        "time per run. Per-path rate: "
        f"N / the run's time; its ratio to the 100-path run's (goal for 2,000: >= {GOAL}x). During every run a "
        "client read the run page (`GET /api/stitch/runs/{id}`, the whole run with its 2,000 "
        "paths) and the console's page for it in turn, every 0.5 s (a person watching; the console itself follows "
        "the run live over server-sent events).",
        "",
        "| database | paths | run time (s) | paths/s | ratio to 100 | run page p50 / p95 / max (ms) | console page "
        "p95 (ms) | read errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("SQLite", "PostgreSQL"):
            times, reader = measure(kind, Path(tmp))
            lines += rows(kind, times, reader)
    body = "\n".join(lines)
    print(body)
    write_section("Stitch fan-out", body, "python -m benchmarks stitch-fanout")


if __name__ == "__main__":
    main()
