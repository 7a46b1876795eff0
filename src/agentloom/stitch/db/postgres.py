"""PostgreSQL: row locks per run (SELECT ... FOR UPDATE) and SKIP LOCKED claims, so several
servers can share one database without a broker; JSONB and timestamptz on the driver; an
event's writes pipelined into one round trip."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import ColumnElement, Connection, Engine, case, create_engine, func, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from agentloom.stitch.db.dialect import Dialect, dumps

log = logging.getLogger(__name__)
MIGRATIONS_LOCK = 0x57_17_C4  # pg_advisory_xact_lock key for the schema steps


class PostgreSQL(Dialect):
    name = "postgresql"
    mark = "%s"
    for_update = " FOR UPDATE"
    for_share = " FOR SHARE"  # a flow's delete waits for the run being started from it
    timestamp_type = "TIMESTAMP WITH TIME ZONE"
    json_type = "JSONB"
    # A commit waits for the network and the WAL flush: that stays on a thread.
    inline = False
    driver_error = psycopg.Error
    _autovacuum_checked = False

    def engine(self, url: URL) -> Engine:
        # No pre-ping: it is a round trip before every transaction, on the path of every
        # completion. A connection the server dropped fails its request instead (503, see the
        # API), and SQLAlchemy then discards the whole pool, so the next request reconnects.
        return create_engine(url, pool_size=10, max_overflow=10)

    def skip_locked(self) -> bool:
        return True

    def array_length(self, column: ColumnElement[Any], key: str) -> ColumnElement[int]:
        items = column.op("->")(key)  # jsonb_array_length refuses anything but an array
        return case((func.jsonb_typeof(items) == "array", func.jsonb_array_length(items)), else_=0)

    def reclaim_space(self, engine: Engine) -> None:
        """Autovacuum makes the space of pruned rows reusable; said once per process when it is off."""
        if self._autovacuum_checked:
            return
        self._autovacuum_checked = True
        with engine.connect() as conn:
            if conn.execute(text("SHOW autovacuum")).scalar() != "on":
                log.warning(
                    "PostgreSQL's autovacuum is off: the space of the runs retention prunes is never reused and "
                    "the database keeps growing; turn it on (autovacuum = on, PostgreSQL's default) or VACUUM "
                    "the stitch_ tables regularly"
                )

    def tune_churning_tables(self, conn: Connection, tables: list[str]) -> None:
        # Autovacuum's default waits for a fifth of a table to be dead rows. Under retention a
        # table's live rows stay about constant while every event updates and every prune deletes,
        # so by then new rows have gone to new pages and the table has grown; vacuuming at 2 %
        # keeps the freed space reused. A smaller fill factor on the runs keeps room in each page
        # for the updates of a run under way (HOT updates: no new index entries).
        for table in tables:
            conn.execute(
                text(
                    f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0.02, "
                    "autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05)"
                )
            )
        conn.execute(text("ALTER TABLE stitch_runs SET (fillfactor = 80)"))

    def lock_migrations(self, conn: Connection) -> None:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATIONS_LOCK})

    def json_in(self, value: Any) -> Jsonb:
        return Jsonb(value, dumps=dumps)

    @contextmanager
    def pipeline(self, conn: Connection) -> Iterator[None]:
        """The statements inside go out without waiting for each answer, in one round trip
        with the first result read (an event's writes: run, events, attempts, timers, outbox)."""
        try:
            with conn.connection.driver_connection.pipeline():  # type: ignore[union-attr]  # psycopg's connection
                yield
        except psycopg.Error as exc:  # raised when the pipeline is read
            raise DBAPIError.instance(None, None, exc, psycopg.Error) from exc
