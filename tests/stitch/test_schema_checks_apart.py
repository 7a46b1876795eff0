"""No input schema is checked, and no value checked against one, while a transaction is open:
a check may take its whole budget, and a run's row lock (or SQLite's write lock) would be held
all that time. A process that has not planned a flow version yet (a fresh server) plans it
apart first, for a run start, a gate completion and any other event on the run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Connection

from agentloom.stitch import input_schemas, plans
from agentloom.stitch.db import Database
from agentloom.stitch.engine import Engine
from agentloom.stitch.flows import Flows
from agentloom.stitch.input_schemas import InputRefused

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
GRAPH = {
    "nodes": [{"id": "gate", "type": "UX", "position": {"x": 0, "y": 0}, "data": {"inputSchema": SCHEMA}}],
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
}


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


def recorded(monkeypatch: pytest.MonkeyPatch, db: Database) -> list[bool]:
    """Whether a transaction was open at each schema check and each value check."""
    open_now: list[bool] = []
    seen: list[bool] = []
    real_transaction = db.transaction

    @contextmanager
    def watched() -> Iterator[Connection]:
        open_now.append(True)
        try:
            with real_transaction() as conn:
                yield conn
        finally:
            open_now.pop()

    def spy(real: Callable[..., Any]) -> Callable[..., Any]:
        def checked(*args: Any) -> Any:
            seen.append(bool(open_now))
            return real(*args)

        return checked

    monkeypatch.setattr(db, "transaction", watched)
    monkeypatch.setattr(input_schemas, "check", spy(input_schemas.check))
    monkeypatch.setattr(input_schemas, "violations", spy(input_schemas.violations))
    return seen


def test_schemas_and_values_are_checked_outside_every_transaction(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = Flows(db).create("apart", GRAPH)
    engine = Engine(db, "http://127.0.0.1:9")
    seen = recorded(monkeypatch, db)

    plans.forget()  # a fresh process: nothing planned
    with pytest.raises(InputRefused):
        engine.start_run(flow["id"], {"n": "one"})
    plans.forget()
    run, _ = engine.start_run(flow["id"], {"n": 1})
    plans.forget()
    with pytest.raises(InputRefused):
        engine.complete(run["id"], "gate", {"ok": "yes"})
    plans.forget()
    result, _ = engine.cancel_run(run["id"])  # any other event on the run
    assert result.outcome.name == "APPLIED"

    assert seen and not any(seen), seen  # checks happened, none with a transaction open
