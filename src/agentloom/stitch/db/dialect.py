"""Everything SQLite and PostgreSQL do differently, in one place: :class:`Dialect`, with one
subclass per database (:mod:`.sqlite`, :mod:`.postgres`). The rest of Stitch writes one SQL
for both, through SQLAlchemy or the fixed statements of :mod:`.hot`, and asks its dialect
for the few clauses, types and habits that differ.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import Any, ClassVar

import orjson
from sqlalchemy import ColumnElement, Connection, Engine, Update, func, select, update
from sqlalchemy.engine import URL

from agentloom.stitch.db.schema import attempts, outbox

# Why a pending webhook was settled without sending it (its row's last_error).
SETTLED = "not sent again: its attempt had finished when its lease ran out (its sender stopped before marking it)"


class Dialect(ABC):
    name: ClassVar[str]
    mark: ClassVar[str]  # the driver's parameter placeholder
    # Clauses that lock what a SELECT reads: an event's run, a flow a run is started from.
    for_update: ClassVar[str]
    for_share: ClassVar[str]
    timestamp_type: ClassVar[str]  # a timezone-aware moment, for ALTER TABLE
    json_type: ClassVar[str]  # the JSON column type, for ALTER TABLE
    # Whether an event's transaction is short enough to run on the event loop (no thread switch).
    inline: ClassVar[bool]
    driver_error: type[Exception]

    @abstractmethod
    def engine(self, url: URL) -> Engine: ...

    def writer(self) -> AbstractContextManager[Any]:
        """Held around every write transaction of this process."""
        return nullcontext()

    def skip_locked(self) -> bool:
        """Whether claims pass over rows another transaction holds (SELECT ... SKIP LOCKED)."""
        return False

    def claim(self, now: float, until: float, limit: int) -> Update:
        """Lease the outbox rows whose lease ran out (at most ``limit``) until ``until``."""
        due = (
            select(outbox.c.id)
            .where(outbox.c.state == "pending", outbox.c.lease_until < now)
            .order_by(outbox.c.id)
            .limit(limit)
        )
        if self.skip_locked():
            due = due.with_for_update(skip_locked=True)
        return (
            update(outbox)
            .where(outbox.c.id.in_(due.scalar_subquery()))
            .values(lease_until=until, tries=outbox.c.tries + 1)
            .returning(
                outbox.c.id, outbox.c.run_id, outbox.c.node_key, outbox.c.attempt, outbox.c.url, outbox.c.payload
            )
        )

    def settle_finished(self, now: float, limit: int) -> Update:
        """Mark 'skipped' the outbox rows whose lease ran out but whose attempt has finished (at
        most ``limit``): a callback, a deadline or a cancellation ended it after the webhook went
        out, and the sender died before marking the row. Sending it again would only earn a 409."""
        finished = (
            select(attempts.c.id)
            .where(
                attempts.c.run_id == outbox.c.run_id,
                attempts.c.node_key == outbox.c.node_key,
                attempts.c.attempt == outbox.c.attempt,
                attempts.c.finished_at.is_not(None),
            )
            .exists()
        )
        due = (
            select(outbox.c.id)
            .where(outbox.c.state == "pending", outbox.c.lease_until < now, finished)
            .order_by(outbox.c.id)
            .limit(limit)
        )
        if self.skip_locked():
            due = due.with_for_update(skip_locked=True, of=outbox)
        return (
            update(outbox)
            .where(outbox.c.id.in_(due.scalar_subquery()), outbox.c.state == "pending")
            .values(state="skipped", last_error=SETTLED)
        )

    def lock_migrations(self, conn: Connection) -> None:  # noqa: B027 - most databases need nothing here
        """Serialise the schema steps of servers that start together."""

    def reclaim_space(self, engine: Engine) -> None:  # noqa: B027 - PostgreSQL's autovacuum does it by itself
        """Give back the space of rows just deleted (after a retention prune)."""

    def tune_churning_tables(self, conn: Connection, tables: list[str]) -> None:  # noqa: B027 - SQLite has no such knobs
        """Storage settings for the tables whose rows are updated and deleted all day."""

    def array_length(self, column: ColumnElement[Any], key: str) -> ColumnElement[int]:
        """How many items the array at ``key`` of a JSON column's object holds (0 when there is none)."""
        return func.coalesce(func.json_array_length(column, f"$.{key}"), 0)

    # -- values on the driver (the fixed statements of :mod:`.hot`) -------------------------
    @abstractmethod
    def json_in(self, value: Any) -> Any:
        """A JSON column's value as the driver takes it."""

    def json_out(self, value: Any) -> Any:
        """A JSON column's value as the driver returned it, decoded."""
        return value

    def stamp(self, moment: datetime) -> Any:
        """A timestamp column's value as the driver takes it."""
        return moment

    @contextmanager
    def pipeline(self, conn: Connection) -> Iterator[None]:
        """Statements that may go out without waiting for each answer."""
        yield


def dumps(value: Any) -> str:
    """JSON text: orjson (a run's states re-encoded on every event cost a tenth of the event
    through ``json``), or ``json`` for what orjson refuses: integers beyond 64 bits, which
    JSON allows. Read back with ``json``: orjson would turn such integers into floats."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)
