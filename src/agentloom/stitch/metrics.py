"""Stitch's Prometheus metrics (``GET /metrics``): the metric objects, the one-line calls the
engine, the callbacks and the dispatcher make where things happen, and the scrape.

Every name, label and meaning is in docs/stitch-metrics.md.

Several server processes (``agentloom stitch serve --workers N``) each count their own
events; prometheus_client's multiprocess mode adds them up. ``serve`` gives each start a fresh
``PROMETHEUS_MULTIPROC_DIR`` before the processes import this module (the library chooses
where values live when it is imported), and a scrape merges every process's files. A server
process that died keeps its counts (counters never go down); its share of the live gauges is
dropped. Without the variable (one process), values live in memory.

What the database knows (the dispatch backlog, its oldest row) is read at scrape time by the
process answering it, not counted, so it is right whichever process sent or died.

Counting happens after a transaction committed: a batch that rolled back and was applied
again callback by callback counts once.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from agentloom.stitch.execution import Execution

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the classic text format every Prometheus reads
FINISHED = frozenset({"completed", "failed", "cancelled"})  # run statuses that end a run
PRUNED_TABLES = ("runs", "events", "attempts", "outbox", "timers")  # shown at 0 before the first prune
# A callback is a transaction (group commit), usually milliseconds; a dispatch includes waiting for
# a connection, the worker's answer and the re-sends (up to STITCH_WORKER_TIMEOUT each).
CALLBACK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DISPATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# This module's own registry: in one process it is what a scrape renders; in multiprocess
# mode the values are in files and the registry is not read.
_REGISTRY = CollectorRegistry(auto_describe=True)

RUNS_STARTED = Counter("stitch_runs_started", "Runs started.", ["flow"], registry=_REGISTRY)
RUNS_FINISHED = Counter(
    "stitch_runs_finished", "Runs that reached a finished status.", ["flow", "status"], registry=_REGISTRY
)
NODE_COMPLETIONS = Counter(
    "stitch_node_completions", "Node paths completed (any node type).", ["flow"], registry=_REGISTRY
)
NODE_RETRIES = Counter(
    "stitch_node_retries",
    "Attempts started after a node path's first (automatic or manual).",
    ["flow"],
    registry=_REGISTRY,
)
CALLBACK_SECONDS = Histogram(
    "stitch_callback_seconds",
    "Time from a signed worker callback being taken to its transaction committed.",
    ["outcome"],
    buckets=CALLBACK_BUCKETS,
    registry=_REGISTRY,
)
DISPATCH_SECONDS = Histogram(
    "stitch_dispatch_seconds",
    "Time from a webhook being handed to the sender to the worker accepting it, or to giving up.",
    ["result"],
    buckets=DISPATCH_BUCKETS,
    registry=_REGISTRY,
)
DELIVERY_RESENDS = Counter(
    "stitch_delivery_resends", "Webhooks sent again because they may not have reached the worker.", registry=_REGISTRY
)
DELIVERIES_FAILED = Counter(
    "stitch_deliveries_failed", "Webhooks given up on (the node fails).", ["cause"], registry=_REGISTRY
)
POOL_IN_USE = Gauge(
    "stitch_db_pool_in_use",
    "Database connections checked out of the server processes' pools.",
    multiprocess_mode="livesum",
    registry=_REGISTRY,
)
SERVER_PROCESSES = Gauge(
    "stitch_server_processes",
    "Server processes alive whose counts this scrape adds up.",
    multiprocess_mode="livesum",
    registry=_REGISTRY,
)
CALLBACKS_WAITING = Gauge(
    "stitch_callbacks_waiting",
    "Workers' callbacks waiting for a turn to be handled (STITCH_CALLBACK_CONCURRENCY per process).",
    multiprocess_mode="livesum",
    registry=_REGISTRY,
)
CALLBACKS_REFUSED = Counter(
    "stitch_callbacks_refused",
    "Workers' callbacks answered 503 with Retry-After because STITCH_CALLBACK_QUEUE were waiting already.",
    registry=_REGISTRY,
)
PRUNED_ROWS = Counter("stitch_pruned_rows", "Rows deleted by retention.", ["table"], registry=_REGISTRY)
for _table in PRUNED_TABLES:
    PRUNED_ROWS.labels(_table)


# -- the calls made where things happen ------------------------------------------------------
MAX_FLOW_LABELS = 1_000  # flows with series of their own in one process; the rest count under "other"
_labelled: set[str] = set()


def _flow(flow_id: str) -> str:
    """The ``flow`` label: the flow's id, or ``other`` past :data:`MAX_FLOW_LABELS` flows (each
    series costs memory in every process and in Prometheus, and flows are made by API users)."""
    if flow_id in _labelled:
        return flow_id
    if len(_labelled) >= MAX_FLOW_LABELS:
        return "other"
    _labelled.add(flow_id)
    return flow_id


def run_started(flow_id: str) -> None:
    RUNS_STARTED.labels(_flow(flow_id)).inc()


def applied(flow_id: str, execution: Execution, run_status: str) -> None:
    """One committed event on a run of ``flow_id``; ``run_status`` is the run's status after it.
    A run counts as finished on every event that leaves it finished: nothing is applied to a
    finished run but a retry, so a failed run that is retried counts again when it ends again."""
    if not execution.events:
        return
    flow_id = _flow(flow_id)
    completed = sum(1 for event in execution.events if event.status == "completed")
    if completed:
        NODE_COMPLETIONS.labels(flow_id).inc(completed)
    retries = sum(1 for change in execution.attempts.values() if change.new and change.attempt > 1)
    if retries:
        NODE_RETRIES.labels(flow_id).inc(retries)
    if run_status in FINISHED:
        RUNS_FINISHED.labels(flow_id, run_status).inc()


def callback_handled(outcome: str, seconds: float) -> None:
    CALLBACK_SECONDS.labels(outcome).observe(seconds)


def callbacks_waiting(count: int) -> None:
    CALLBACKS_WAITING.set(count)


def callback_refused() -> None:
    CALLBACKS_REFUSED.inc()


def delivered(seconds: float) -> None:
    DISPATCH_SECONDS.labels("delivered").observe(seconds)


def resent() -> None:
    DELIVERY_RESENDS.inc()


def delivery_failed(cause: str, seconds: float) -> None:
    """``cause``: ``worker_answered`` (non-2xx or a redirect), ``unreachable`` (no answer after the
    re-sends) or ``refused`` (the webhook policy, or a URL that cannot be sent to)."""
    DELIVERIES_FAILED.labels(cause).inc()
    DISPATCH_SECONDS.labels("failed").observe(seconds)


def process_started() -> None:
    SERVER_PROCESSES.set(1)


def pool_in_use(connections: int) -> None:
    POOL_IN_USE.set(connections)


def pruned(table: str, rows: int) -> None:
    """Rows retention deleted from ``table`` (``stitch_runs`` or ``runs``: labelled by the short name, as
    :data:`PRUNED_TABLES` shows them)."""
    if rows:
        PRUNED_ROWS.labels(table.removeprefix("stitch_")).inc(rows)


# -- the scrape ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Backlog:
    """Read from the database at scrape time."""

    pending: int  # outbox rows not yet sent, failed or skipped (queued or in flight)
    oldest_seconds: float  # the oldest of them's age; 0 when there are none


class _Scraped:
    """The collectors one scrape renders, in order."""

    def __init__(self, parts: Iterable[Collector]) -> None:
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        for part in self.parts:
            yield from part.collect()


class _BacklogCollector:
    def __init__(self, backlog: Backlog) -> None:
        self.backlog = backlog

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "stitch_dispatch_backlog", "Webhooks in the outbox not yet delivered or given up on.", self.backlog.pending
        )
        yield GaugeMetricFamily(
            "stitch_dispatch_oldest_pending_seconds",
            "Age of the oldest webhook in the backlog (0 when it is empty).",
            self.backlog.oldest_seconds,
        )


def render(backlog: Backlog) -> bytes:
    """The whole exposition: every process's counts (multiprocess mode) or this one's, and the backlog."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        _forget_dead(directory)
        counted: Collector = MultiProcessCollector(None, path=directory)  # type: ignore[no-untyped-call]  # unannotated
    else:
        counted = _REGISTRY
    return generate_latest(_Scraped([counted, _BacklogCollector(backlog)]))


def process_exiting() -> None:
    """This process stops: its live gauges leave the sums (its counters stay)."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        mark_process_dead(os.getpid(), directory)  # type: ignore[no-untyped-call]  # unannotated in the library


_LIVE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db$")


def _forget_dead(directory: str) -> None:
    """A process killed without a shutdown (kill -9, OOM) leaves its live gauge files; drop them."""
    for path in glob.glob(os.path.join(directory, "gauge_live*_*.db")):
        found = _LIVE_FILE.search(path)
        if found and not _alive(int(found.group(1))):
            mark_process_dead(int(found.group(1)), directory)  # type: ignore[no-untyped-call]  # unannotated


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
