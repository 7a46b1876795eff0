"""PostgreSQL: row locks per run (SELECT ... FOR UPDATE) and SKIP LOCKED outbox claims, so
several servers can share one database without a broker."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Select, create_engine, select, text
from sqlalchemy.engine import URL

from agentloom.stitch.db.schema import runs

CLAIM = text(
    "UPDATE stitch_outbox SET lease_until = :until, tries = tries + 1 WHERE id IN ("
    " SELECT id FROM stitch_outbox WHERE state = 'pending' AND lease_until < :now"
    " ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED)"
    " RETURNING id, run_id, node_key, attempt, url, payload"
)


def engine(url: str | URL) -> Engine:
    return create_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)


def lock_run(run_id: str) -> Select[Any]:
    return select(runs).where(runs.c.id == run_id).with_for_update()
