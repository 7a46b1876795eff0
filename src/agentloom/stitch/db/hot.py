"""The statements every completion runs, as fixed SQL handed to the driver as it is.

A completion reads its run under a lock and writes the run row, its events, the attempt
history, timers and the next webhook: about eight statements. Built through SQLAlchemy's
expression layer each one costs more CPU (coercion, cache keys, type processors) than the
database spends running it, so this path keeps fixed SQL strings, made once from the tables
of :mod:`.schema` (their names and columns are written there only), and converts its few
JSON and time values itself through the :class:`~.dialect.Dialect`, in the formats
SQLAlchemy's column types read back. Everything else (flows, listings, migrations) stays on
SQLAlchemy. The transaction is still SQLAlchemy's; the statements run on the driver's cursor
inside it, and a driver error is raised as SQLAlchemy's, so errors are reported as everywhere
else. Several events committed together (group commit) write each table with one statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.exc import DBAPIError

from agentloom.stitch.db.dialect import Dialect
from agentloom.stitch.db.schema import attempts, events, flows, outbox, paths, runs, timers

ROWS_PER_STATEMENT = 500  # SQLite takes 32,766 parameters a statement; a wide fan-out writes more


@dataclass(frozen=True)
class RunRow:
    """A run as an event reads it: what it started from, and its state as stored (JSON). (Its
    input is read only when a root node needs it: a fan-out's input is as long as its array.)"""

    flow_id: str
    flow_version: int
    node_states: dict[str, Any]
    tally: dict[str, Any] | None


def _names(table: Table, columns: Sequence[str]) -> str:
    return ", ".join(table.c[name].name for name in columns)  # a name the table lacks raises here, at import


def _where(table: Table, columns: Sequence[str]) -> str:
    return " AND ".join(f"{table.c[name].name} = ?" for name in columns)


def _insert(table: Table, columns: Sequence[str], values: Sequence[str] | None = None) -> str:
    """INSERT of these columns; ``values``: SQL per column (default: a parameter each)."""
    return f"INSERT INTO {table.name} ({_names(table, columns)}) VALUES ({', '.join(values or ['?'] * len(columns))})"


def _update(table: Table, columns: Sequence[str], where: Sequence[str]) -> str:
    assignments = ", ".join(f"{table.c[name].name} = ?" for name in columns)
    return f"UPDATE {table.name} SET {assignments} WHERE {_where(table, where)}"


_RUN_COLUMNS = ("id", "flow_id", "flow_version", "node_states", "tally")
_NEW_RUN = (
    "id",
    "flow_id",
    "flow_version",
    "graph",
    "input",
    "node_states",
    "tally",
    "status",
    "created_at",
    "updated_at",
)
_OUTBOX_COLUMNS = ("run_id", "node_key", "attempt", "url", "payload", "state", "lease_until", "tries", "created_at")
_SQL = {
    "runs": f"SELECT {_names(runs, _RUN_COLUMNS)} FROM {runs.name} WHERE id IN (?) ORDER BY id{{for_update}}",
    "lock_runs": f"SELECT id FROM {runs.name} WHERE id IN (?) ORDER BY id{{for_update}}",
    "graph": f"SELECT graph FROM {runs.name} WHERE {_where(runs, ['id'])}",
    "input": f"SELECT input FROM {runs.name} WHERE {_where(runs, ['id'])}",
    "flow": f"SELECT id, version FROM {flows.name} WHERE {_where(flows, ['id'])} AND deleted_at IS NULL{{for_share}}",
    "flow_graph": f"SELECT graph FROM {flows.name} WHERE {_where(flows, ['id'])}",
    # The run's copy of the graph is copied by the database, not sent again.
    "insert_run": f"INSERT INTO {runs.name} ({_names(runs, _NEW_RUN)}) "
    f"SELECT ?, id, version, graph, ?, ?, ?, ?, ?, ? FROM {flows.name} WHERE {_where(flows, ['id'])}",
    "update_run": _update(runs, ["node_states", "tally", "status", "updated_at"], ["id"]),
    "paths": f"SELECT key, state FROM {paths.name} WHERE {_where(paths, ['run_id'])} AND key IN (?)",
    "all_paths": f"SELECT key, state FROM {paths.name} WHERE {_where(paths, ['run_id'])}",
    "path": _insert(paths, ["run_id", "key", "status", "state"])
    + " ON CONFLICT (run_id, key) DO UPDATE SET status = excluded.status, state = excluded.state",
    "event": _insert(events, ["run_id", "node_key", "status", "attempt", "at", "error", "summary"]),
    "attempt": _insert(
        attempts, ["run_id", "node_key", "attempt", "status", "input", "output", "error", "started_at", "finished_at"]
    ),
    "end_attempt": _update(attempts, ["status", "output", "error", "finished_at"], ["run_id", "node_key", "attempt"]),
    "drop_timer": f"DELETE FROM {timers.name} WHERE {_where(timers, ['run_id', 'node_key', 'attempt', 'kind'])}",
    "timer": _insert(timers, ["run_id", "node_key", "attempt", "kind", "due_at"]),
    # Leased to the process that commits it (tries 1): it sends the webhook right after.
    "outbox": _insert(outbox, _OUTBOX_COLUMNS, ["?", "?", "?", "?", "?", "'pending'", "?", "1", "?"])
    + " RETURNING run_id, node_key, attempt, id",
    "renew": f"UPDATE {outbox.name} SET lease_until = ? WHERE {_where(outbox, ['id'])} AND state = 'pending'",
    "sent": f"UPDATE {outbox.name} SET state = 'sent' WHERE {_where(outbox, ['id'])} AND state = 'pending'",
    "worker_status": _update(attempts, ["worker_status"], ["run_id", "node_key", "attempt"]),
}


class HotPath:
    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.json_in = dialect.json_in
        self.json_out = dialect.json_out
        self.stamp = dialect.stamp
        self.mark = dialect.mark
        self.sql = {
            name: sql.format(for_update=dialect.for_update, for_share=dialect.for_share).replace("?", dialect.mark)
            for name, sql in _SQL.items()
        }

    def read_runs(self, conn: Connection, run_ids: Sequence[str]) -> dict[str, RunRow]:
        """These runs, locked in id order (FOR UPDATE; SQLite's BEGIN IMMEDIATE holds them all)."""
        if not run_ids:
            return {}
        rows = self._execute(conn, self._in("runs", len(run_ids)), tuple(sorted(run_ids))).fetchall()
        json_out = self.json_out
        return {row[0]: RunRow(row[1], row[2], json_out(row[3]), json_out(row[4])) for row in rows}

    def lock_runs(self, conn: Connection, run_ids: Sequence[str]) -> None:
        """Lock these runs in id order, as a batch of events does (FOR UPDATE; SQLite: nothing more)."""
        ordered = sorted(run_ids)
        for start in range(0, len(ordered), ROWS_PER_STATEMENT):
            chunk = ordered[start : start + ROWS_PER_STATEMENT]
            self._execute(conn, self._in("lock_runs", len(chunk)), tuple(chunk))

    def read_paths(self, conn: Connection, run_id: str, keys: Sequence[str] | None = None) -> dict[str, Any]:
        """A run's states kept apart (``stitch_paths``), as stored (JSON): these keys', or all."""
        if keys is None:
            rows = self.run(conn, "all_paths", (run_id,))
        else:
            rows = self._execute(conn, self._in("paths", len(keys)), (run_id, *keys))
        json_out = self.json_out
        return {key: json_out(state) for key, state in rows.fetchall()}

    def insert_outbox(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> dict[tuple[str, str, int], int]:
        """Outbox rows (run_id, node_key, attempt, url, payload, lease_until, created_at), one
        statement; the new ids by (run_id, node_key, attempt), unique per dispatch."""
        ids: dict[tuple[str, str, int], int] = {}
        for batch, sql in self._batches(self.sql["outbox"], rows):
            for run_id, key, attempt, outbox_id in self._execute(conn, sql, tuple(v for row in batch for v in row)):
                ids[(run_id, key, attempt)] = outbox_id
        return ids

    def read_flow(self, conn: Connection, flow_id: str) -> tuple[str, int] | None:
        """A live flow's id and version, locked against its delete."""
        row = self.run(conn, "flow", (flow_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def read_flow_graph(self, conn: Connection, flow_id: str) -> dict[str, Any]:
        graph: dict[str, Any] = self.json_out(self.run(conn, "flow_graph", (flow_id,)).fetchone()[0])
        return graph

    def read_input(self, conn: Connection, run_id: str) -> Any:
        return self.json_out(self.run(conn, "input", (run_id,)).fetchone()[0])

    def read_graph(self, conn: Connection, run_id: str) -> dict[str, Any]:
        graph: dict[str, Any] = self.json_out(self.run(conn, "graph", (run_id,)).fetchone()[0])
        return graph

    def _in(self, name: str, count: int) -> str:
        """Statement ``name`` with its ``IN (?)`` widened to ``count`` parameters."""
        return self.sql[name].replace(f"({self.mark})", f"({', '.join([self.mark] * count)})")

    def run(self, conn: Connection, name: str, params: Sequence[Any]) -> Any:
        return self._execute(conn, self.sql[name], tuple(params))

    @contextmanager
    def pipeline(self, conn: Connection) -> Iterator[None]:
        with self.dialect.pipeline(conn):
            yield

    def _execute(self, conn: Connection, sql: str, params: Any, many: bool = False) -> Any:
        """On the driver's own cursor, inside SQLAlchemy's transaction: its execution layer
        (result metadata, events, type processing) costs several times what SQLite spends on
        the statement. A driver error is raised as SQLAlchemy's, as it would be there (503 in
        the API), and a dead connection is discarded by the rollback that follows."""
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]  # the DBAPI connection
        error = self.dialect.driver_error
        try:
            (cursor.executemany if many else cursor.execute)(sql, params)
        except error as exc:
            raise DBAPIError.instance(sql, params, exc, error) from exc
        return cursor

    def _batches(self, sql: str, rows: Sequence[Sequence[Any]]) -> Iterator[tuple[Sequence[Sequence[Any]], str]]:
        """``sql`` (one INSERT row) for up to ROWS_PER_STATEMENT rows at a time, with a VALUES list
        (what follows the row, ON CONFLICT or RETURNING, follows the list)."""
        head, _, tail = sql.partition(" VALUES ")
        end = tail.index(")") + 1
        one, rest = tail[:end], tail[end:]
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            batch = rows[start : start + ROWS_PER_STATEMENT]
            yield batch, f"{head} VALUES {', '.join([one] * len(batch))}{rest}"

    def many(self, conn: Connection, name: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        sql = self.sql[name]
        if len(rows) > 1 and sql.startswith("INSERT"):
            # One statement with a VALUES list: psycopg's executemany is a pipeline with a
            # round of its own bookkeeping per row, more than the rows cost the database.
            for batch, batch_sql in self._batches(sql, rows):
                self._execute(conn, batch_sql, tuple(v for row in batch for v in row))
        elif len(rows) > 1:
            self._execute(conn, sql, [tuple(row) for row in rows], many=True)
        else:
            self._execute(conn, sql, tuple(rows[0]))
