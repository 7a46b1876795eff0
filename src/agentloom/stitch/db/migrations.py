"""Creates and upgrades the schema: numbered steps, applied once each, on either database.

Servers sharing a database may start together, so the steps run under the dialect's
migration lock (PostgreSQL: an advisory lock; SQLite's BEGIN IMMEDIATE serialises them already).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from sqlalchemy import Connection, Engine, insert, inspect, null, select, text

from agentloom.stitch.db import schema
from agentloom.stitch.db.dialect import Dialect

log = logging.getLogger(__name__)


def _v1(conn: Connection, dialect: Dialect) -> None:
    schema.metadata.create_all(conn)
    # The callback-signing secret lives in the database so every server on it agrees.
    conn.execute(schema.settings.insert().values(key="callback_secret", value=secrets.token_hex(32)))


def _v2(conn: Connection, dialect: Dialect) -> None:
    # Version 1 databases gain the new columns in place (ADD COLUMN works on both databases)
    # and the new tables and indexes; a new database got all of it from create_all in _v1.
    columns = {c["name"] for c in inspect(conn).get_columns("stitch_flows")}
    if "deleted_at" in columns:
        return
    conn.execute(text(f"ALTER TABLE stitch_flows ADD COLUMN deleted_at {dialect.timestamp_type}"))
    conn.execute(text("ALTER TABLE stitch_events ADD COLUMN error TEXT"))
    conn.execute(text("ALTER TABLE stitch_events ADD COLUMN summary TEXT"))
    schema.metadata.create_all(conn, tables=[schema.attempts, schema.timers])
    for index in schema.runs.indexes:
        if index.name in ("ix_stitch_runs_listing", "ix_stitch_runs_status"):
            index.create(conn)


def _v3(conn: Connection, dialect: Dialect) -> None:
    # A flow's runs newest first (the console lists them; a flow may have thousands).
    for index in schema.runs.indexes:
        if index.name == "ix_stitch_runs_flow_listing":
            index.create(conn, checkfirst=True)  # a new database got it from create_all in _v1


def _v4(conn: Connection, dialect: Dialect) -> None:
    # Runs written before keep their fan-out paths in node_states and no tally: the engine
    # moves them and counts on their next event, and the read side reads both places.
    if "tally" not in {c["name"] for c in inspect(conn).get_columns("stitch_runs")}:
        conn.execute(text(f"ALTER TABLE stitch_runs ADD COLUMN tally {dialect.json_type}"))
    schema.metadata.create_all(conn, tables=[schema.paths])


# Retention deletes from these and every event updates or adds to them: they churn all day at a
# steady size.
CHURNING = [schema.runs, schema.paths, schema.outbox, schema.events, schema.attempts, schema.timers]


def _v5(conn: Connection, dialect: Dialect) -> None:
    dialect.tune_churning_tables(conn, [t.name for t in CHURNING])


def _v6(conn: Connection, dialect: Dialect) -> None:
    # Each flow's current version becomes its first kept one (the earlier ones were never kept).
    schema.metadata.create_all(conn, tables=[schema.flow_versions])  # a new database got it from _v1
    flows, versions = schema.flows, schema.flow_versions
    kept = select(versions.c.flow_id).where(versions.c.flow_id == flows.c.id, versions.c.version == flows.c.version)
    copied = select(flows.c.id, flows.c.version, flows.c.name, flows.c.graph, null(), flows.c.updated_at).where(
        ~kept.exists()
    )
    conn.execute(insert(versions).from_select(["flow_id", "version", "name", "graph", "author", "created_at"], copied))


STEPS: list[tuple[int, str, Callable[[Connection, Dialect], None]]] = [
    (1, "flows, runs, outbox, events, settings", _v1),
    (2, "attempt history, timers, deleted flows, event errors, run listing indexes", _v2),
    (3, "a flow's runs newest first (index)", _v3),
    (4, "node paths one row each, a run's tally", _v4),
    (5, "storage settings for tables that churn", _v5),
    (6, "flow versions, each flow's current one kept", _v6),
]


def migrate(engine: Engine, dialect: Dialect) -> int:
    """Bring the schema to the latest version; returns it."""
    with engine.begin() as conn:
        dialect.lock_migrations(conn)
        conn.execute(text("CREATE TABLE IF NOT EXISTS stitch_schema_version (version INTEGER NOT NULL)"))
        current = conn.execute(text("SELECT MAX(version) FROM stitch_schema_version")).scalar() or 0
        if current == 0 and inspect(conn).has_table("stitch_flows"):
            raise RuntimeError("stitch tables exist without a schema version; they were not made by this program")
        for version, summary, step in STEPS:
            if version > current:
                log.info("stitch schema: applying %d (%s)", version, summary)
                step(conn, dialect)
                conn.execute(text("INSERT INTO stitch_schema_version (version) VALUES (:v)"), {"v": version})
                current = version
    return current
