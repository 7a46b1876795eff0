"""The Stitch tables, one definition for SQLite and PostgreSQL (JSON becomes JSONB there)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()
Json = JSON().with_variant(JSONB(), "postgresql")
Id = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements INTEGER PRIMARY KEY only

flows = Table(
    "stitch_flows",
    metadata,
    Column("id", String(36), primary_key=True),  # a UUID in text form on both databases
    Column("name", Text, nullable=False),
    Column("graph", Json, nullable=False),
    Column("version", Integer, nullable=False, default=1),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # Deleted flows are hidden, not removed: their runs keep pointing at them (and carry their
    # own graph copy), so a run's history stays readable after its flow is gone.
    Column("deleted_at", DateTime(timezone=True)),
)

# Every version of every flow, as it was saved: version 1 when the flow is created, the next one
# whenever its graph or name changes (written in the same transaction as the flow row).
flow_versions = Table(
    "stitch_flow_versions",
    metadata,
    Column("flow_id", String(36), ForeignKey("stitch_flows.id", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("name", Text, nullable=False),
    Column("graph", Json, nullable=False),
    Column("author", Text),  # who saved it, as the client said; null: unknown
    Column("created_at", DateTime(timezone=True), nullable=False),
)

runs = Table(
    "stitch_runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("flow_id", String(36), ForeignKey("stitch_flows.id", ondelete="CASCADE"), nullable=False),
    Column("flow_version", Integer, nullable=False),
    Column("graph", Json, nullable=False),  # the graph the run started with: edits never change a running run
    Column("input", Json),
    # The states of the nodes outside fan-outs (but Splitters and Collectors) and of the
    # fan-out templates; every other node state is a row of stitch_paths.
    Column("node_states", Json, nullable=False),
    # Counts an event updates instead of reading every state (state.Tally); null: not counted yet.
    Column("tally", Json),
    Column("status", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_stitch_runs_flow_id", "flow_id"),
    Index("ix_stitch_runs_listing", "created_at", "id"),  # newest first, keyset pagination
    Index("ix_stitch_runs_flow_listing", "flow_id", "created_at", "id"),  # one flow's runs, its last run
    Index("ix_stitch_runs_status", "status", "created_at", "id"),
)

# A run's node states that grow with its fan-outs, one row each, so an event reads and writes
# the paths it touches, not all of them: every node path on a fan-out (``work_3``) and every
# Splitter and Collector (their outputs are as long as their arrays).
paths = Table(
    "stitch_paths",
    metadata,
    Column("run_id", String(36), ForeignKey("stitch_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("status", String(32), nullable=False),
    Column("state", Json, nullable=False),  # NodeState.to_json
    Index(
        "ix_stitch_paths_waiting",
        "run_id",
        sqlite_where=text("status = 'waiting_for_user'"),
        postgresql_where=text("status = 'waiting_for_user'"),
    ),
)

# Webhooks to send, written in the same transaction as the state change that needs them.
outbox = Table(
    "stitch_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("run_id", String(36), ForeignKey("stitch_runs.id", ondelete="CASCADE"), nullable=False),
    Column("node_key", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("url", Text, nullable=False),
    Column("payload", Json, nullable=False),
    Column("state", String(16), nullable=False, default="pending"),  # pending | sent | failed | skipped
    Column("lease_until", Float, nullable=False, default=0.0),  # epoch seconds; a sender owns the row until then
    Column("tries", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("run_id", "node_key", "attempt", name="uq_stitch_outbox_dispatch"),  # at most once per attempt
    Index("ix_stitch_outbox_due", "state", "lease_until"),
)

events = Table(
    "stitch_events",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("run_id", String(36), ForeignKey("stitch_runs.id", ondelete="CASCADE"), nullable=False),
    Column("node_key", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("error", Text),  # the node's error, bounded (EVENT_TEXT_CHARS)
    Column("summary", Text),  # a bounded excerpt of the output's JSON
    Index("ix_stitch_events_run", "run_id", "id"),
)

# Every attempt of every node path, kept: node_states holds only the latest one.
attempts = Table(
    "stitch_attempts",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("run_id", String(36), ForeignKey("stitch_runs.id", ondelete="CASCADE"), nullable=False),
    Column("node_key", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(32), nullable=False),  # the attempt's last status (running, completed, failed, ...)
    Column("input", Json),
    Column("output", Json),
    Column("error", Text),
    Column("worker_status", Integer),  # the HTTP status the worker answered the webhook with
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    UniqueConstraint("run_id", "node_key", "attempt", name="uq_stitch_attempts"),
)

# Moments the engine must act on by itself: a deadline passing ('timeout') or a scheduled
# automatic retry coming due ('retry'). Written in the same transaction as the state that
# needs them; any server process fires them (SKIP LOCKED on PostgreSQL).
timers = Table(
    "stitch_timers",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("run_id", String(36), ForeignKey("stitch_runs.id", ondelete="CASCADE"), nullable=False),
    Column("node_key", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("kind", String(16), nullable=False),  # timeout | retry
    Column("due_at", Float, nullable=False),  # epoch seconds
    UniqueConstraint("run_id", "node_key", "attempt", "kind", name="uq_stitch_timers"),
    Index("ix_stitch_timers_due", "due_at"),
)

settings = Table(
    "stitch_settings",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
