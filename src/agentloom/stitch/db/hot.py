"""The statements every completion runs, as fixed SQL handed to the driver as it is.

A completion reads its run under a lock and writes the run row, its events, the attempt
history, timers and the next webhook: about eight statements. Built through SQLAlchemy's
expression layer each one costs more CPU (coercion, cache keys, type processors) than the
database spends running it, so this path keeps fixed SQL strings and converts its few
JSON and time values itself, in the formats SQLAlchemy's column types read back (JSON
text and ``YYYY-MM-DD HH:MM:SS.ffffff`` on SQLite, JSONB and timestamptz on PostgreSQL).
Everything else (flows, listings, migrations) stays on SQLAlchemy. The transaction is still
SQLAlchemy's; the statements run on the driver's cursor inside it, and a driver error is
raised as SQLAlchemy's, so errors are reported as everywhere else. Several events
committed together (group commit) write each table with one statement.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

RunRow = tuple[str, int, dict[str, Any], Any]  # flow_id, flow_version, node_states, input


class HotPath:
    def __init__(self, postgres: bool) -> None:
        self.postgres = postgres
        if postgres:
            import psycopg
            from psycopg.types.json import Jsonb

            self.json_in: Any = lambda value: Jsonb(value, dumps=_dumps)
            self.driver_error: type[Exception] = psycopg.Error
        else:
            self.json_in = _json_text
            self.driver_error = sqlite3.Error
        lock = " FOR UPDATE" if postgres else ""  # SQLite: BEGIN IMMEDIATE holds the write lock already
        sql = {
            "runs": f"SELECT id, flow_id, flow_version, node_states, input FROM stitch_runs WHERE id IN (?) ORDER BY id{lock}",
            "graph": "SELECT graph FROM stitch_runs WHERE id = ?",
            # A shared lock on PostgreSQL: a flow's delete waits for the run being started.
            "flow": f"SELECT id, version FROM stitch_flows WHERE id = ? AND deleted_at IS NULL{' FOR SHARE' if postgres else ''}",
            "flow_graph": "SELECT graph FROM stitch_flows WHERE id = ?",
            "insert_run": "INSERT INTO stitch_runs (id, flow_id, flow_version, graph, input, node_states, status, created_at, "
            "updated_at) SELECT ?, id, version, graph, ?, ?, ?, ?, ? FROM stitch_flows WHERE id = ?",
            "update_run": "UPDATE stitch_runs SET node_states = ?, status = ?, updated_at = ? WHERE id = ?",
            "event": "INSERT INTO stitch_events (run_id, node_key, status, attempt, at, error, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
            "attempt": "INSERT INTO stitch_attempts (run_id, node_key, attempt, status, input, output, error, started_at, finished_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "end_attempt": "UPDATE stitch_attempts SET status = ?, output = ?, error = ?, finished_at = ? "
            "WHERE run_id = ? AND node_key = ? AND attempt = ?",
            "drop_timer": "DELETE FROM stitch_timers WHERE run_id = ? AND node_key = ? AND attempt = ? AND kind = ?",
            "timer": "INSERT INTO stitch_timers (run_id, node_key, attempt, kind, due_at) VALUES (?, ?, ?, ?, ?)",
            "outbox": "INSERT INTO stitch_outbox (run_id, node_key, attempt, url, payload, state, lease_until, tries, created_at)",
            "outbox_row": "(?, ?, ?, ?, ?, 'pending', ?, 1, ?)",
            "sent": "UPDATE stitch_outbox SET state = 'sent' WHERE id = ? AND state = 'pending'",
            "worker_status": "UPDATE stitch_attempts SET worker_status = ? WHERE run_id = ? AND node_key = ? AND attempt = ?",
        }
        self.mark = "%s" if postgres else "?"
        self.sql = {name: text.replace("?", "%s") for name, text in sql.items()} if postgres else sql

    def stamp(self, moment: datetime) -> Any:
        return moment if self.postgres else moment.replace(tzinfo=None).isoformat(" ", "microseconds")

    def json_out(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) and not self.postgres else value

    def read_runs(self, conn: Connection, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """These runs, locked in id order (FOR UPDATE; SQLite's BEGIN IMMEDIATE holds them all)."""
        if not run_ids:
            return {}
        marks = ", ".join([self.mark] * len(run_ids))
        rows = self._execute(
            conn, self.sql["runs"].replace(f"({self.mark})", f"({marks})"), tuple(sorted(run_ids))
        ).fetchall()
        return {row[0]: (row[1], row[2], self.json_out(row[3]), self.json_out(row[4])) for row in rows}

    def insert_outbox(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> dict[tuple[str, str, int], int]:
        """Outbox rows (run_id, node_key, attempt, url, payload, lease_until, created_at), one
        statement; the new ids by (run_id, node_key, attempt), unique per dispatch."""
        ids: dict[tuple[str, str, int], int] = {}
        for start in range(0, len(rows), 500):
            batch = rows[start : start + 500]
            values = ", ".join([self.sql["outbox_row"]] * len(batch))
            sql = f"{self.sql['outbox']} VALUES {values} RETURNING run_id, node_key, attempt, id"
            for run_id, key, attempt, outbox_id in self._execute(conn, sql, tuple(v for row in batch for v in row)):
                ids[(run_id, key, attempt)] = outbox_id
        return ids

    def read_flow(self, conn: Connection, flow_id: str) -> tuple[str, int] | None:
        """A live flow's id and version, locked against its delete."""
        row = self.run(conn, "flow", (flow_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def read_flow_graph(self, conn: Connection, flow_id: str) -> dict[str, Any]:
        return self.json_out(self.run(conn, "flow_graph", (flow_id,)).fetchone()[0])  # type: ignore[no-any-return]

    def read_graph(self, conn: Connection, run_id: str) -> dict[str, Any]:
        return self.json_out(self.run(conn, "graph", (run_id,)).fetchone()[0])  # type: ignore[no-any-return]

    def run(self, conn: Connection, name: str, params: Sequence[Any]) -> Any:
        return self._execute(conn, self.sql[name], tuple(params))

    @contextmanager
    def pipeline(self, conn: Connection) -> Iterator[None]:
        """PostgreSQL: the statements inside go out without waiting for each answer, in one
        round trip with the first result read (an event's writes: run, events, attempts,
        timers, outbox). SQLite: as is."""
        if not self.postgres:
            yield
            return
        try:
            with conn.connection.driver_connection.pipeline():  # type: ignore[union-attr]
                yield
        except self.driver_error as exc:  # raised when the pipeline is read
            raise DBAPIError.instance(None, None, exc, self.driver_error) from exc

    def _execute(self, conn: Connection, sql: str, params: Any, many: bool = False) -> Any:
        """On the driver's own cursor, inside SQLAlchemy's transaction: its execution layer
        (result metadata, events, type processing) costs several times what SQLite spends on
        the statement. A driver error is raised as SQLAlchemy's, as it would be there (503 in
        the API), and a dead connection is discarded by the rollback that follows."""
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            (cursor.executemany if many else cursor.execute)(sql, params)
        except self.driver_error as exc:
            raise DBAPIError.instance(sql, params, exc, self.driver_error) from exc
        return cursor

    def many(self, conn: Connection, name: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        sql = self.sql[name]
        if len(rows) > 1 and sql.startswith("INSERT"):
            # One statement with a VALUES list: psycopg's executemany is a pipeline with a
            # round of its own bookkeeping per row, more than the rows cost the database.
            # At most 500 rows a statement: SQLite takes 32,766 parameters, a wide fan-out more.
            head, _, one = sql.partition(" VALUES ")
            for start in range(0, len(rows), 500):
                batch = rows[start : start + 500]
                self._execute(
                    conn, f"{head} VALUES {', '.join([one] * len(batch))}", tuple(v for row in batch for v in row)
                )
        elif len(rows) > 1:
            self._execute(conn, sql, [tuple(row) for row in rows], many=True)
        else:
            self._execute(conn, sql, tuple(rows[0]))


def _json_text(value: Any) -> str | None:
    # SQLAlchemy stores SQL NULL for None in a JSON column by default; so do we.
    return None if value is None else _dumps(value)


def _dumps(value: Any) -> str:
    """JSON text: orjson (a run's states re-encoded on every event cost a tenth of the event
    through ``json``), or ``json`` for what orjson refuses: integers beyond 64 bits, which
    JSON allows. Read back with ``json``: orjson would turn such integers into floats."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)
