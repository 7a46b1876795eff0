"""The database behind Stitch: one interface; what SQLite and PostgreSQL do differently is
their :class:`~.dialect.Dialect` (:mod:`.sqlite`, :mod:`.postgres`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, Engine, RowMapping, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import QueuePool

from agentloom.stitch.db import migrations, schema
from agentloom.stitch.db.dialect import Dialect
from agentloom.stitch.db.hot import HotPath

log = logging.getLogger(__name__)


class Database:
    def __init__(self, url: str) -> None:
        parsed = make_url(normalise_url(url))
        self.url = parsed
        self.dialect = dialect_for(parsed)
        self.engine: Engine = self.dialect.engine(parsed)
        self.version = migrations.migrate(self.engine, self.dialect)
        self.hot = HotPath(self.dialect)

    @property
    def name(self) -> str:
        return self.dialect.name

    @property
    def inline(self) -> bool:
        """Whether an event's transaction is short enough to run on the event loop."""
        return self.dialect.inline

    def describe(self) -> str:
        return self.url.render_as_string(hide_password=True)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.dialect.writer(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            yield conn

    def claim_due(self, now: float, lease_seconds: float, limit: int = 100) -> list[RowMapping]:
        """Lease again the webhooks whose lease ran out, after settling those whose attempt has
        already finished (a crash between a callback and the sent mark leaves such rows)."""
        with self.transaction() as conn:
            settled = conn.execute(self.dialect.settle_finished(now, limit)).rowcount
            if settled:
                log.info("settled %d webhooks whose attempt finished before they were marked sent", settled)
            return list(conn.execute(self.dialect.claim(now, now + lease_seconds, limit)).mappings().all())

    def setting(self, key: str) -> str | None:
        with self.reading() as conn:
            value: str | None = conn.execute(
                select(schema.settings.c.value).where(schema.settings.c.key == key)
            ).scalar()
            return value

    def connections_in_use(self) -> int:
        """Connections checked out of this process's pool now."""
        pool = self.engine.pool
        return pool.checkedout() if isinstance(pool, QueuePool) else 0

    def dispose(self) -> None:
        self.engine.dispose()


def dialect_for(url: URL) -> Dialect:
    """The database's dialect (its module imported only when used: psycopg is not light)."""
    if url.get_backend_name() == "postgresql":
        from agentloom.stitch.db.postgres import PostgreSQL

        return PostgreSQL()
    from agentloom.stitch.db.sqlite import SQLite

    if url.database not in (None, "", ":memory:"):
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    return SQLite(url.database)


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3; a plain path means a SQLite file."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return "sqlite:///" + os.path.abspath(url)
    return url


def default_url(data_dir: Path) -> str:
    return f"sqlite:///{(data_dir / 'stitch' / 'stitch.db').absolute()}"


__all__ = ["Database", "Dialect", "default_url", "dialect_for", "normalise_url", "schema"]
