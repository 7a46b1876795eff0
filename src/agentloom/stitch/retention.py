"""Retention: finished runs, and every row they own, pruned by age and by a count per flow.

A run is pruned only when it is finished (completed, failed or cancelled) and either finished
longer ago than the maximum age or is older than the newest ``max_runs_per_flow`` finished
runs of its flow. Running runs, and runs waiting for a person, are never touched, however old.

Each batch of at most ``batch_size`` runs is its own short transaction: the batch's runs are
chosen and locked (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so an event on a run waits for
nothing and two servers pruning together take different runs; SQLite: the write lock of
``BEGIN IMMEDIATE``), their rows deleted table by table, and the run rows deleted only if still
finished. Batches are idempotent, so several server processes may prune the same database.

After a prune that deleted rows, the dialect gives the space back (:meth:`Dialect.reclaim_space`:
SQLite's incremental vacuum; PostgreSQL's autovacuum does it by itself).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread
from sqlalchemy import Connection, and_, delete, func, or_, select, tuple_

from agentloom.stitch.db import Database
from agentloom.stitch.db.schema import attempts, events, flows, outbox, paths, runs, timers

log = logging.getLogger(__name__)

FINISHED = ("completed", "failed", "cancelled")
OWNED = (events, attempts, outbox, timers, paths)  # every table with a row per run, deleted before the run
TABLES = tuple(table.name for table in (*OWNED, runs))

# Called after each committed batch with a table's name and the rows deleted from it: the one
# place a metric of pruned rows hooks in.
OnPruned = Callable[[str, int], None]


@dataclass(frozen=True)
class Policy:
    """What is kept: ``None`` means no limit of that kind."""

    max_age: timedelta | None = None
    max_runs_per_flow: int | None = None
    batch_size: int = 200

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size is {self.batch_size}; it must be at least 1")
        if self.max_runs_per_flow is not None and self.max_runs_per_flow < 0:
            raise ValueError(f"max_runs_per_flow is {self.max_runs_per_flow}; it must be 0 or more")

    @classmethod
    def of(cls, max_age_hours: float | timedelta | None, max_runs_per_flow: int, batch_size: int) -> Policy:
        """From the settings' numbers, where 0 (or None) means no limit; the age in hours or as a timedelta."""
        age = max_age_hours if isinstance(max_age_hours, timedelta) else timedelta(hours=max_age_hours or 0)
        return cls(age if age > timedelta(0) else None, max_runs_per_flow or None, batch_size)

    @property
    def limits(self) -> bool:
        return self.max_age is not None or self.max_runs_per_flow is not None

    def describe(self) -> dict[str, Any]:
        """As the API answers it: ``max_age_hours`` and ``max_runs_per_flow``, null for no limit."""
        return {
            "max_age_hours": None if self.max_age is None else self.max_age.total_seconds() / 3600,
            "max_runs_per_flow": self.max_runs_per_flow,
        }


@dataclass
class Report:
    """What a prune deleted, or would delete (``dry_run``), in rows per table."""

    dry_run: bool
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    batches: int = 0

    @property
    def runs(self) -> int:
        return self.rows[runs.name]


class BadAge(ValueError):
    pass


AGE = re.compile(r"(\d+(?:\.\d+)?)([dhm])")
UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}


MAX_AGE = timedelta(days=36_500)  # a century: older than that is older than any run


def parse_age(text: str) -> timedelta:
    """``14d``, ``12h``, ``30m`` (a number and a unit), at most :data:`MAX_AGE`."""
    match = AGE.fullmatch(text.strip().lower()[:100])
    if match is None:
        raise BadAge(f"{text[:100]!r} is not an age: write a number and a unit, d, h or m (for example 14d, 12h, 30m)")
    try:
        age = float(match[1]) * UNITS[match[2]]
    except OverflowError:
        age = MAX_AGE + UNITS["d"]
    if age > MAX_AGE:
        raise BadAge(f"{text!r} is longer than Stitch keeps count of: give an age of at most {MAX_AGE.days}d")
    return age


def prune(
    db: Database,
    policy: Policy,
    *,
    now: datetime | None = None,
    flow_id: str | None = None,
    dry_run: bool = False,
    on_pruned: OnPruned | None = None,
) -> Report:
    """One pass over every flow (or ``flow_id`` only), a batch at a time; then, if anything was
    deleted, the space is given back. A dry run reads the same batches and deletes nothing."""
    report = Report(dry_run)
    if not policy.limits:
        return report
    moment = _utc(now or datetime.now(UTC))
    age_cut = moment - policy.max_age if policy.max_age is not None else None
    with db.reading() as conn:
        flow_ids = [flow_id] if flow_id is not None else list(conn.execute(select(flows.c.id)).scalars())
    for one in flow_ids:
        for counts in _flow_batches(db, policy, one, age_cut, dry_run):
            report.batches += 1
            for table, count in counts.items():
                report.rows[table] += count
                if on_pruned is not None and not dry_run and count:
                    on_pruned(table, count)
    if report.runs and not dry_run:
        db.dialect.reclaim_space(db.engine)
    return report


def _flow_batches(
    db: Database, policy: Policy, flow_id: str, age_cut: datetime | None, dry_run: bool
) -> Iterator[dict[str, int]]:
    finished = and_(runs.c.flow_id == flow_id, runs.c.status.in_(FINISHED))
    rules: list[Any] = []
    upper: datetime | None = age_cut
    if age_cut is not None:
        # A run finishes after it starts: created_at bounds the range on the flow's listing index.
        rules.append(and_(runs.c.created_at < age_cut, runs.c.updated_at < age_cut))
    if policy.max_runs_per_flow is not None:
        boundary = _newest_kept(db, finished, policy.max_runs_per_flow)
        if boundary is not None:
            rules.append(tuple_(runs.c.created_at, runs.c.id) < tuple_(*boundary))
            upper = boundary[0] if upper is None else max(upper, boundary[0])
    if not rules or upper is None:
        return
    chosen = (
        select(runs.c.id, runs.c.created_at)
        .where(finished, runs.c.created_at <= upper, or_(*rules))
        .order_by(runs.c.created_at, runs.c.id)
        .limit(policy.batch_size)
    )
    after: tuple[datetime, str] | None = None
    while True:
        batch = chosen if after is None else chosen.where(tuple_(runs.c.created_at, runs.c.id) > tuple_(*after))
        if dry_run:
            with db.reading() as conn:
                picked = conn.execute(batch).all()
                counts = _count(conn, [row.id for row in picked])
        else:
            if db.dialect.skip_locked():
                batch = batch.with_for_update(skip_locked=True)
            with db.transaction() as conn:
                picked = conn.execute(batch).all()
                counts = _delete(conn, [row.id for row in picked])
        if not picked:
            return
        yield counts
        after = (picked[-1].created_at, picked[-1].id)
        if len(picked) < policy.batch_size:
            return


def _newest_kept(db: Database, finished: Any, keep: int) -> tuple[datetime, str] | None:
    """The oldest of the ``keep`` newest finished runs (the runs before it go), or None when the
    flow has no more than ``keep``. Read once per pass: runs that finish meanwhile are newer
    or wait for the next pass."""
    with db.reading() as conn:
        row = conn.execute(
            select(runs.c.created_at, runs.c.id)
            .where(finished)
            .order_by(runs.c.created_at.desc(), runs.c.id.desc())
            .offset(keep - 1)
            .limit(1)
        ).first()
    return None if row is None else (_utc(row.created_at), row.id)


def _utc(moment: datetime) -> datetime:
    """Aware, in UTC: SQLite hands timestamps back naive (they are stored in UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _count(conn: Connection, run_ids: list[str]) -> dict[str, int]:
    if not run_ids:
        return {}
    counts = {
        table.name: conn.execute(select(func.count()).select_from(table).where(table.c.run_id.in_(run_ids))).scalar()
        or 0
        for table in OWNED
    }
    counts[runs.name] = len(run_ids)
    return counts


def _delete(conn: Connection, run_ids: list[str]) -> dict[str, int]:
    if not run_ids:
        return {}
    counts = {table.name: conn.execute(delete(table).where(table.c.run_id.in_(run_ids))).rowcount for table in OWNED}
    # The runs were chosen finished under this transaction's lock; checked again all the same.
    counts[runs.name] = conn.execute(delete(runs).where(runs.c.id.in_(run_ids), runs.c.status.in_(FINISHED))).rowcount
    return counts


class Pruner:
    """The server's background pass: every ``interval`` seconds, starting at once."""

    def __init__(self, db: Database, policy: Policy, interval: float, on_pruned: OnPruned | None = None) -> None:
        self.db, self.policy, self.interval, self.on_pruned = db, policy, interval, on_pruned

    async def run(self) -> None:
        while True:
            try:
                report = await anyio.to_thread.run_sync(lambda: prune(self.db, self.policy, on_pruned=self.on_pruned))
                if report.runs:
                    log.info("retention: pruned %d finished runs (%s)", report.runs, _shown(report.rows))
            except Exception:  # a failed pass (database away, a deadlock victim) is retried next interval
                log.exception("retention: the prune pass failed; trying again in %g s", self.interval)
            await anyio.sleep(self.interval)


def _shown(rows: dict[str, int]) -> str:
    return ", ".join(f"{table} {count}" for table, count in rows.items())
