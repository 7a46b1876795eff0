"""SQLite: WAL, a busy timeout, and BEGIN IMMEDIATE so each event holds the write lock from its first read."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Select, Update, create_engine, event, select, update
from sqlalchemy.engine import URL

from agentloom.stitch.db.schema import outbox, runs

def claim(now: float, until: float, limit: int) -> Update:
    due = (
        select(outbox.c.id).where(outbox.c.state == "pending", outbox.c.lease_until < now)
        .order_by(outbox.c.id).limit(limit)
    )
    return (
        update(outbox).where(outbox.c.id.in_(due.scalar_subquery()))
        .values(lease_until=until, tries=outbox.c.tries + 1)
        .returning(outbox.c.id, outbox.c.run_id, outbox.c.node_key, outbox.c.attempt, outbox.c.url, outbox.c.payload)
    )


def engine(url: str | URL) -> Engine:
    made = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=8, max_overflow=8)

    @event.listens_for(made, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000", "foreign_keys=ON"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(made, "begin")
    def _begin(conn: Any) -> None:
        # Writers take the lock at once (no deadlock on upgrade); readers never block them (WAL).
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("read_only") else "BEGIN IMMEDIATE")

    return made


def lock_run(run_id: str) -> Select[Any]:
    return select(runs).where(runs.c.id == run_id)  # the transaction already holds the write lock
