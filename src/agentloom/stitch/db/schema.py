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
)

runs = Table(
    "stitch_runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("flow_id", String(36), ForeignKey("stitch_flows.id", ondelete="CASCADE"), nullable=False),
    Column("flow_version", Integer, nullable=False),
    Column("graph", Json, nullable=False),  # the graph the run started with: edits never change a running run
    Column("input", Json),
    Column("node_states", Json, nullable=False),
    Column("status", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_stitch_runs_flow_id", "flow_id"),
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
    Index("ix_stitch_events_run", "run_id", "id"),
)

settings = Table(
    "stitch_settings",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
