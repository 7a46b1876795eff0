"""SQLite: WAL, a busy timeout, BEGIN IMMEDIATE so each event holds the write lock from its
first read, and one writer at a time handed over by a queue."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import threading
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from agentloom.stitch.db.dialect import Dialect, dumps

log = logging.getLogger(__name__)
INCREMENTAL = 2  # PRAGMA auto_vacuum's answer for INCREMENTAL
RECLAIM_PAGES = 2000  # pages freed per step of the incremental vacuum (8 MB with 4 KB pages)
# A read that holds its snapshot while writes go on keeps checkpoints from starting the WAL
# over, so the WAL grows meanwhile; SQLite then keeps the file at its largest unless told to cut
# it back when the WAL restarts.
WAL_LIMIT_BYTES = 32 * 2**20


class SQLite(Dialect):
    name = "sqlite"
    mark = "?"
    for_update = ""  # BEGIN IMMEDIATE holds the write lock already
    for_share = ""
    timestamp_type = "DATETIME"
    json_type = "JSON"
    # In WAL with synchronous=NORMAL a commit does not wait for the disk, so one event's
    # transaction takes well under a millisecond: cheaper on the event loop than two thread
    # switches.
    inline = True
    driver_error = sqlite3.Error

    def __init__(self, database: str | None) -> None:
        # Queueing this process's writers on a lock is fair and prompt, where SQLite's busy
        # handler would sleep and retry.
        self._writer = WriterQueue(database)

    def engine(self, url: URL) -> Engine:
        made = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=8, max_overflow=8)

        @event.listens_for(made, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
            cursor = dbapi_connection.cursor()
            # auto_vacuum first: it takes effect only on a database that has no table yet (an
            # older database is switched by one VACUUM, in reclaim_space).
            for pragma in (
                "auto_vacuum=INCREMENTAL",
                "journal_mode=WAL",
                f"journal_size_limit={WAL_LIMIT_BYTES}",
                "synchronous=NORMAL",
                "busy_timeout=30000",
                "foreign_keys=ON",
            ):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()

        @event.listens_for(made, "begin")
        def _begin(conn: Any) -> None:
            # Writers take the lock at once (no deadlock on upgrade); readers never block them (WAL).
            # On the driver: SQLAlchemy's execution path costs a third of a short transaction. An
            # error is raised as SQLAlchemy's, as that path would (the API answers 503).
            statement = "BEGIN" if conn.get_execution_options().get("read_only") else "BEGIN IMMEDIATE"
            try:
                conn.connection.driver_connection.execute(statement)
            except sqlite3.Error as exc:
                raise DBAPIError.instance(statement, (), exc, sqlite3.Error) from exc

        return made

    def writer(self) -> WriterQueue:
        return self._writer

    def reclaim_space(self, engine: Engine) -> None:
        """Free pages go back to the file system, RECLAIM_PAGES at a time under the write lock,
        so writers wait for one short step at a time. A database made before auto_vacuum was
        set is switched to INCREMENTAL by one VACUUM, which rewrites the whole file while
        holding the write lock: once, on its first prune."""
        raw = engine.raw_connection()
        try:
            driver = raw.driver_connection
            assert driver is not None  # a pooled connection is always open
            with self._writer:
                if driver.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
                    log.info("sqlite: switching the database to auto_vacuum=INCREMENTAL (one VACUUM)")
                    driver.execute("PRAGMA auto_vacuum=INCREMENTAL")
                    driver.execute("VACUUM")
                    return
            while True:
                with self._writer:
                    # Each step of the pragma frees pages: the cursor must be read to the end.
                    driver.execute(f"PRAGMA incremental_vacuum({RECLAIM_PAGES})").fetchall()
                    left = driver.execute("PRAGMA freelist_count").fetchone()[0]
                if not left:
                    return
        finally:
            raw.close()

    def json_in(self, value: Any) -> str | None:
        # SQLAlchemy stores SQL NULL for None in a JSON column by default; so do we.
        return None if value is None else dumps(value)

    def json_out(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def stamp(self, moment: datetime) -> str:
        # The text SQLAlchemy's DateTime writes and reads back on SQLite: naive UTC.
        return moment.replace(tzinfo=None).isoformat(" ", "microseconds")


class WriterQueue:
    """One writer at a time, handed over at once: a thread lock within this process, and an
    flock on a file beside the database between processes (``--workers``). SQLite's own busy
    handler would sleep and retry instead, leaving the database idle between writers."""

    def __init__(self, database: str | None) -> None:
        self._thread_lock = threading.Lock()
        self._path = f"{database}.writer-lock" if database and database != ":memory:" else None
        self._file: int | None = None

    def __enter__(self) -> None:
        self._thread_lock.acquire()
        if self._path is not None:
            if self._file is None:
                self._file = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
        self._thread_lock.release()
