"""The database behind Stitch: one interface, one module per SQL dialect."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import ModuleType

from sqlalchemy import Connection, Engine, RowMapping, select
from sqlalchemy.engine import make_url

from agentloom.stitch.db import migrations, postgres, schema, sqlite
from agentloom.stitch.db.hot import HotPath


class Database:
    def __init__(self, url: str) -> None:
        parsed = make_url(normalise_url(url))
        self.url = parsed
        self.dialect: ModuleType = postgres if parsed.get_backend_name() == "postgresql" else sqlite
        if self.dialect is sqlite and parsed.database not in (None, "", ":memory:"):
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = self.dialect.engine(parsed)
        # SQLite has one writer at a time; queueing this process's writers on a lock is fair
        # and prompt, where SQLite's busy handler would sleep and retry.
        self._writer = sqlite.WriterQueue(parsed.database) if self.dialect is sqlite else nullcontext()
        self.version = migrations.migrate(self.engine)
        self.hot = HotPath(postgres=self.dialect is postgres)
        # SQLite in WAL with synchronous=NORMAL commits without waiting for the disk, so one
        # event's transaction takes well under a millisecond: the callback fast path runs it on
        # the event loop instead of paying two thread switches. PostgreSQL waits for the
        # network and the WAL flush: that stays on a thread.
        self.inline = self.dialect is sqlite

    @property
    def name(self) -> str:
        return str(self.url.get_backend_name())

    def describe(self) -> str:
        return self.url.render_as_string(hide_password=True)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self._writer, self.engine.begin() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            yield conn

    def claim_due(self, now: float, lease_seconds: float, limit: int = 100) -> list[RowMapping]:
        with self.transaction() as conn:
            return list(conn.execute(self.dialect.claim(now, now + lease_seconds, limit)).mappings().all())

    def setting(self, key: str) -> str | None:
        with self.reading() as conn:
            return conn.execute(select(schema.settings.c.value).where(schema.settings.c.key == key)).scalar()

    def dispose(self) -> None:
        self.engine.dispose()


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3; a plain path means a SQLite file."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return "sqlite:///" + os.path.abspath(url)
    return url


def default_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'stitch' / 'stitch.db').absolute()}"


__all__ = ["Database", "default_url", "normalise_url", "schema"]
