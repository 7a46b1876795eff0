"""SQLite: WAL, a busy timeout, and BEGIN IMMEDIATE so each event holds the write lock from its first read."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Select, create_engine, event, select, text
from sqlalchemy.engine import URL

from agentloom.stitch.db.schema import runs

CLAIM = text(
    "UPDATE stitch_outbox SET lease_until = :until, tries = tries + 1 WHERE id IN ("
    " SELECT id FROM stitch_outbox WHERE state = 'pending' AND lease_until < :now ORDER BY id LIMIT :limit)"
    " RETURNING id, run_id, node_key, attempt, url, payload"
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
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return made


def lock_run(run_id: str) -> Select[Any]:
    return select(runs).where(runs.c.id == run_id)  # the transaction already holds the write lock
