"""PostgreSQL: row locks per run (SELECT ... FOR UPDATE, in :mod:`hot`) and SKIP LOCKED outbox
claims, so several servers can share one database without a broker."""

from __future__ import annotations

from sqlalchemy import Engine, Update, create_engine, select, update
from sqlalchemy.engine import URL

from agentloom.stitch.db.schema import outbox


def claim(now: float, until: float, limit: int) -> Update:
    due = (
        select(outbox.c.id)
        .where(outbox.c.state == "pending", outbox.c.lease_until < now)
        .order_by(outbox.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return (
        update(outbox)
        .where(outbox.c.id.in_(due.scalar_subquery()))
        .values(lease_until=until, tries=outbox.c.tries + 1)
        .returning(outbox.c.id, outbox.c.run_id, outbox.c.node_key, outbox.c.attempt, outbox.c.url, outbox.c.payload)
    )


def engine(url: str | URL) -> Engine:
    # No pre-ping: it is a round trip before every transaction, on the path of every
    # completion. A connection the server dropped fails its request instead (503, see the
    # API), and SQLAlchemy then discards the whole pool, so the next request reconnects.
    return create_engine(url, pool_size=10, max_overflow=10)
