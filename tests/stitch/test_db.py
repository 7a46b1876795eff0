"""The schema on both databases: created once, upgraded in place, JSONB on PostgreSQL."""

from __future__ import annotations

from sqlalchemy import inspect, text

from agentloom.stitch.db import Database
from agentloom.stitch.db.migrations import STEPS


def test_migrations_run_once_and_keep_data(database_url: str) -> None:
    first = Database(database_url)
    assert first.version == STEPS[-1][0]
    secret = first.setting("callback_secret")
    first.dispose()
    again = Database(database_url)  # a second start (or a second server) changes nothing
    assert again.setting("callback_secret") == secret and secret and len(secret) == 64
    with again.engine.connect() as conn:
        versions = conn.execute(text("SELECT version FROM stitch_schema_version")).scalars().all()
        tables = set(inspect(conn).get_table_names())
        if again.name == "postgresql":
            kinds = dict(
                conn.execute(
                    text(
                        "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
                        "WHERE column_name IN ('graph', 'node_states')"
                    )
                ).all()
            )
            assert kinds == {
                "stitch_flows.graph": "jsonb",
                "stitch_flow_versions.graph": "jsonb",
                "stitch_runs.graph": "jsonb",
                "stitch_runs.node_states": "jsonb",
            }
            # the tables retention churns are vacuumed early (docs/stitch-operations.md)
            options = dict(
                conn.execute(
                    text("SELECT relname, reloptions FROM pg_class WHERE relname IN ('stitch_runs', 'stitch_outbox')")
                ).all()
            )
            assert "autovacuum_vacuum_scale_factor=0.02" in options["stitch_outbox"]
            assert {"fillfactor=80", "autovacuum_vacuum_scale_factor=0.02"} <= set(options["stitch_runs"])
    assert versions == [version for version, _, _ in STEPS]
    assert {"stitch_flows", "stitch_runs", "stitch_outbox", "stitch_events", "stitch_settings"} <= tables
    again.dispose()
