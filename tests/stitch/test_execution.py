"""Execution, the pure logic of one Stitch run: what one event does to ``node_states`` and what it
asks the engine to write with them (webhooks, event rows, attempt history, timers). Each test
drives a small hand-built plan event by event on a fixed clock, as the engine does (a fresh
Execution per event over the same states), and states the exact outcome."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentloom.stitch.execution import (
    CANCELLED_ERROR,
    TEMPLATE_ORDER,
    AttemptChange,
    Dispatch,
    Event,
    Execution,
    Outcome,
    Result,
    Timer,
    initial_states,
    recount,
    summary,
    template_summary,
)
from agentloom.stitch.graph import Plan, analyse
from agentloom.stitch.models import Graph
from agentloom.stitch.state import RunState, Tally, node_states, node_states_json

W = "http://127.0.0.1:9/w"
NOW = "2026-11-26T12:00:00.000Z"
States = dict[str, dict[str, Any]]


def worker(node_id: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "Worker", "data": {"webhookUrl": W, **data}}


def node(node_id: str, type_: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": type_, "data": data}


def plan(nodes: list[dict[str, Any]], *edges: tuple[str, str]) -> Plan:
    edge_list = [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(edges)]
    return analyse(Graph.model_validate({"nodes": nodes, "edges": edge_list}))


def url(run_id: str, key: str, attempt: int) -> str:
    return f"https://stitch/cb/{run_id}/{key}/{attempt}"


def new(
    p: Plan,
    states: States | None = None,
    run_input: Any = None,
    *,
    at: float = 1000.0,
    node_timeout: float | None = None,
) -> Execution:
    nodes = initial_states(p) if states is None else node_states(states)
    return Execution(RunState("r1", run_input, nodes), p, url, NOW, at=at, node_timeout=node_timeout)


def started(p: Plan, run_input: Any = None, *, at: float = 1000.0, node_timeout: float | None = None) -> Execution:
    ex = new(p, None, run_input, at=at, node_timeout=node_timeout)
    ex.start()
    return ex


def then(ex: Execution, *, at: float = 1000.0) -> Execution:
    """The next event on the same run: the same states, nothing yet to write."""
    return Execution(ex.run, ex.plan, url, NOW, at=at, node_timeout=ex.node_timeout)


def json_of(ex: Execution) -> States:
    """The run's node states as stored (``stitch_runs.node_states``)."""
    return node_states_json(ex.run.nodes)


def statuses(ex: Execution) -> dict[str, str]:
    return {key: state.status for key, state in ex.run.nodes.items()}


def payload(key: str, attempt: int, value: Any, **config: Any) -> dict[str, Any]:
    return {
        "runId": "r1",
        "nodeId": key,
        "config": {"webhookUrl": W, **config},
        "input": value,
        "callbackUrl": f"https://stitch/cb/r1/{key}/{attempt}",
    }


def fan() -> Plan:
    """w -> s (items) -> m -> n (UX) -> c (Collector) -> after."""
    return plan(
        [
            worker("w"),
            node("s", "Splitter", arrayPath="items"),
            worker("m"),
            node("n", "UX"),
            node("c", "Collector"),
            worker("after"),
        ],
        ("w", "s"),
        ("s", "m"),
        ("m", "n"),
        ("n", "c"),
        ("c", "after"),
    )


def nested() -> Plan:
    """s1 (the run's input) -> s2 (each element) -> x -> c2 (closes s2) -> c1 (closes s1)."""
    return plan(
        [node("s1", "Splitter"), node("s2", "Splitter"), worker("x"), node("c2", "Collector"), node("c1", "Collector")],
        ("s1", "s2"),
        ("s2", "x"),
        ("x", "c2"),
        ("c2", "c1"),
    )


RETRY = {"maxAttempts": 3, "backoffSeconds": 5, "backoffFactor": 3}


# -- the answer, summaries, templates, initial states ------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "status", "ok", "duplicate"),
    [
        (Outcome.APPLIED, 200, True, False),
        (Outcome.DUPLICATE, 200, True, True),
        (Outcome.BAD_REQUEST, 400, False, False),
        (Outcome.NOT_FOUND, 404, False, False),
        (Outcome.CONFLICT, 409, False, False),
    ],
)
def test_an_outcome_answers_with_its_http_status_and_body(
    outcome: Outcome, status: int, ok: bool, duplicate: bool
) -> None:
    """Applied and duplicate events are ok; only a duplicate says so."""
    assert outcome.http_status == status
    assert Result(outcome, "why").reply() == {"ok": ok, "detail": "why", "duplicate": duplicate}


def test_a_summary_is_compact_json_cut_at_200_characters() -> None:
    """Strings are kept as they are, other values as compact JSON (non-ASCII kept, the unknown as str)."""
    assert summary(None) is None
    assert summary("plain") == "plain"
    assert summary(0) == "0" and summary([]) == "[]"
    assert summary({"a": 1, "b": ["é", None]}) == '{"a":1,"b":["é",null]}'
    assert summary({"day": dt.date(2026, 1, 2)}) == '{"day":"2026-01-02"}'
    assert summary("x" * 200) == "x" * 200
    assert summary("x" * 199 + "yz") == "x" * 197 + "..."
    assert summary(list(range(100))) == "[" + ",".join(map(str, range(100)))[:196] + "..."


def test_a_template_reads_the_worst_of_its_paths() -> None:
    """The order is running, retrying, waiting_for_user, pending, failed, cancelled, completed."""
    order = ["running", "retrying", "waiting_for_user", "pending", "failed", "cancelled", "completed"]
    assert [s.value for s in TEMPLATE_ORDER] == order
    for i, worst in enumerate(order):
        states = {f"m_{j}": {"status": s, "node_id": "m", "path": [j]} for j, s in enumerate(reversed(order[i:]))}
        states["m"] = {"status": "completed", "node_id": "m", "path": None}  # the template itself is no path
        states["other_0"] = {"status": "running", "node_id": "other", "path": [0]}
        assert template_summary(node_states(states), "m") == {"status": worst, "paths": {s: 1 for s in order[i:]}}
    two = {
        "m_0": {"status": "failed", "node_id": "m", "path": [0]},
        "m_1": {"status": "failed", "node_id": "m", "path": [1]},
    }
    assert template_summary(node_states(two), "m") == {"status": "failed", "paths": {"failed": 2}}
    assert template_summary(node_states({"m_0": {"status": "odd", "node_id": "m", "path": [0]}}), "m") == {
        "status": "pending",
        "paths": {"odd": 1},
    }


@pytest.mark.parametrize(
    ("own", "shown"),
    [
        ("completed", "completed"),
        ("cancelled", "cancelled"),
        ("pending", "pending"),
        ("failed", "pending"),
        (None, "pending"),
    ],
)
def test_a_template_without_paths_is_pending_unless_closed_or_cancelled(own: str | None, shown: str) -> None:
    states = {} if own is None else {"m": {"status": own, "node_id": "m", "path": None}}
    assert template_summary(node_states(states), "m") == {"status": shown, "paths": {}}


def test_initial_states_are_pending_and_fan_out_nodes_are_templates() -> None:
    def pending(node_id: str, path: list[int] | None) -> dict[str, Any]:
        return {
            "status": "pending",
            "output": None,
            "error": None,
            "node_id": node_id,
            "path": path,
            "attempt": 0,
            "input": None,
        }

    assert node_states_json(initial_states(fan())) == {
        "w": pending("w", []),
        "s": pending("s", []),
        "m": pending("m", None),
        "n": pending("n", None),
        "c": pending("c", []),
        "after": pending("after", []),
    }


# -- starting, dispatching, the merge rule ------------------------------------------------------


def test_start_fires_every_root_with_the_run_input() -> None:
    """A Worker is dispatched (its data as config, a signed callback URL) with a deadline timer;
    a UX node waits for its user; a node with upstreams waits for them all."""
    p = plan([worker("a", timeoutSeconds=30), node("u", "UX"), worker("b")], ("a", "b"), ("u", "b"))
    ex = started(p, {"q": 1}, node_timeout=60)
    assert statuses(ex) == {"a": "running", "u": "waiting_for_user", "b": "pending"}
    assert json_of(ex)["a"] == {
        "status": "running",
        "output": None,
        "error": None,
        "node_id": "a",
        "path": [],
        "attempt": 1,
        "input": {"q": 1},
        "updated_at": NOW,
    }
    assert ex.dispatches == [Dispatch("a", 1, W, payload("a", 1, {"q": 1}, timeoutSeconds=30))]
    assert ex.timers == [Timer("a", 1, "timeout", 1030.0)]  # data.timeoutSeconds wins over the default
    assert ex.events == [Event("a", "running", 1), Event("u", "waiting_for_user", 1)]
    assert ex.attempts == {
        ("a", 1): AttemptChange("a", 1, new=True, input={"q": 1}),
        ("u", 1): AttemptChange("u", 1, new=True, status="waiting_for_user", input={"q": 1}),
    }
    assert ex.run_status() == "running" and not ex.cancelled()


def test_a_worker_without_its_own_deadline_gets_the_default_or_none() -> None:
    assert started(plan([worker("a")]), node_timeout=60).timers == [Timer("a", 1, "timeout", 1060.0)]
    ex = started(plan([worker("a")]))
    assert ex.timers == []
    answer = then(ex)
    answer.callback("a", 1, "completed", None, None)
    assert answer.timers_done == [] and answer.events == [Event("a", "completed", 1)]


@pytest.mark.parametrize(
    ("a_out", "u_out", "merged"),
    [
        ({"x": 1, "k": "a"}, {"k": "u"}, {"x": 1, "k": "u"}),  # objects merge key by key, the later edge wins
        ([1], "text", {"a": [1], "u": "text"}),  # anything else goes under its upstream's id
        ({"x": 1}, 5, {"x": 1, "u": 5}),
    ],
)
def test_the_merge_rule(a_out: Any, u_out: Any, merged: Any) -> None:
    p = plan([worker("a"), node("u", "UX"), worker("b")], ("a", "b"), ("u", "b"))
    ex = started(p)
    assert then(ex).complete("u", u_out) == Result(Outcome.APPLIED, "u completed")
    assert json_of(ex)["b"]["status"] == "pending"  # still waits for a
    last = then(ex)
    last.callback("a", 1, "completed", a_out, None)
    assert last.dispatches == [Dispatch("b", 1, W, payload("b", 1, merged))]


# -- Worker callbacks ---------------------------------------------------------------------------


def test_a_completed_callback_ends_the_attempt_and_fires_downstream() -> None:
    """One upstream: the output is the next node's input unchanged. A replay changes nothing."""
    ex = started(plan([worker("a", timeoutSeconds=30), worker("b")], ("a", "b")), "in")
    answer = then(ex, at=1010)
    assert answer.callback("a", 1, "completed", {"v": 1}, None) == Result(Outcome.APPLIED, "a completed")
    assert answer.timers_done == [("a", 1, "timeout")]
    assert json_of(ex)["a"] == {
        "status": "completed",
        "output": {"v": 1},
        "error": None,
        "node_id": "a",
        "path": [],
        "attempt": 1,
        "input": "in",
        "updated_at": NOW,
    }
    assert answer.events == [Event("a", "completed", 1, None, '{"v":1}'), Event("b", "running", 1)]
    assert answer.attempts == {
        ("a", 1): AttemptChange("a", 1, new=False, status="completed", output={"v": 1}, finished=True),
        ("b", 1): AttemptChange("b", 1, new=True, input={"v": 1}),
    }
    assert answer.dispatches == [Dispatch("b", 1, W, payload("b", 1, {"v": 1}))] and answer.timers == []
    replay = then(ex)
    assert replay.callback("a", 1, "completed", {"v": 2}, None) == Result(
        Outcome.DUPLICATE, "a was already completed by this attempt; nothing changed"
    )
    assert replay.events == [] and replay.dispatches == [] and replay.timers_done == []
    assert json_of(ex)["a"]["output"] == {"v": 1}
    assert then(ex).callback("a", 1, "failed", None, "late") == Result(
        Outcome.CONFLICT, "node 'a' is completed, not running"
    )


def test_a_failed_callback_fails_the_node_for_good_without_a_policy() -> None:
    """The worker's error (or a default), its output, and the event's error cut at 500 characters."""
    ex = started(plan([worker("a"), worker("b")], ("a", "b")))
    answer = then(ex)
    assert answer.callback("a", 1, "failed", {"partial": 1}, None) == Result(Outcome.APPLIED, "a failed")
    assert statuses(ex) == {"a": "failed", "b": "pending"} and ex.run_status() == "failed"
    assert json_of(ex)["a"]["error"] == "the worker reported a failure" and json_of(ex)["a"]["output"] == {"partial": 1}
    assert answer.events == [Event("a", "failed", 1, "the worker reported a failure", None)]
    assert answer.attempts == {
        ("a", 1): AttemptChange(
            "a",
            1,
            new=False,
            status="failed",
            output={"partial": 1},
            error="the worker reported a failure",
            finished=True,
        )
    }
    assert then(ex).callback("a", 1, "failed", None, None) == Result(
        Outcome.DUPLICATE, "a was already failed by this attempt; nothing changed"
    )
    assert then(ex).callback("a", 1, "failed", None, "another") == Result(
        Outcome.CONFLICT, "node 'a' is failed, not running"
    )
    assert then(ex).callback("a", 1, "completed", 1, None) == Result(
        Outcome.CONFLICT, "node 'a' is failed, not running"
    )

    long = started(plan([worker("a")]))
    answer = then(long)
    answer.callback("a", 1, "failed", None, "x" * 499 + "yz")
    assert answer.events == [Event("a", "failed", 1, "x" * 499 + "y")]
    assert json_of(long)["a"]["error"] == "x" * 499 + "yz" and answer.attempts[("a", 1)].error == "x" * 499 + "yz"


def test_callbacks_that_are_refused() -> None:
    ex = started(fan())
    then(ex).callback("w", 1, "completed", {"items": [1]}, None)
    assert then(ex).callback("zz", 1, "completed", None, None) == Result(Outcome.NOT_FOUND, "run r1 has no node 'zz'")
    assert then(ex).callback("m", 0, "completed", None, None) == Result(Outcome.NOT_FOUND, "run r1 has no node 'm'")
    assert then(ex).callback("s", 1, "completed", None, None) == Result(
        Outcome.CONFLICT, "node 's' is a Splitter node, not a Worker"
    )
    assert then(ex).callback("m_0", 2, "completed", None, None) == Result(
        Outcome.CONFLICT, "callback for attempt 2 of 'm_0', which is on attempt 1"
    )
    assert json_of(ex)["m_0"]["status"] == "running"


def test_a_failed_dispatch_fails_the_attempt_it_was_for() -> None:
    ex = started(plan([worker("a", timeoutSeconds=5)]))
    moved_on = Result(Outcome.DUPLICATE, "the node has moved on; nothing changed")
    assert then(ex).dispatch_failed("zz", 1, "refused") == moved_on
    assert then(ex).dispatch_failed("a", 2, "refused") == moved_on
    answer = then(ex)
    assert answer.dispatch_failed("a", 1, "HTTP 500") == Result(Outcome.APPLIED, "a failed: HTTP 500")
    assert json_of(ex)["a"]["status"] == "failed" and json_of(ex)["a"]["error"] == "HTTP 500"
    assert answer.timers_done == [("a", 1, "timeout")] and answer.events == [Event("a", "failed", 1, "HTTP 500")]
    assert then(ex).dispatch_failed("a", 1, "again") == moved_on


# -- UX nodes -----------------------------------------------------------------------------------


def test_a_ux_node_is_completed_by_hand_only_while_waiting() -> None:
    ex = started(plan([node("u", "UX"), worker("a")], ("u", "a")), "in")
    assert ex.run_status() == "waiting_for_user"
    assert then(ex).complete("a", 1) == Result(
        Outcome.BAD_REQUEST, "node 'a' is a Worker node; only UX nodes are completed by hand"
    )
    assert then(ex).complete("zz", 1) == Result(Outcome.NOT_FOUND, "run r1 has no node 'zz'")
    answer = then(ex)
    assert answer.complete("u", {"ok": True}) == Result(Outcome.APPLIED, "u completed")
    assert answer.events == [Event("u", "completed", 1, None, '{"ok":true}'), Event("a", "running", 1)]
    assert answer.attempts[("u", 1)] == AttemptChange(
        "u", 1, new=False, status="completed", output={"ok": True}, finished=True
    )
    assert answer.dispatches == [Dispatch("a", 1, W, payload("a", 1, {"ok": True}))]
    assert then(ex).complete("u", 2) == Result(Outcome.CONFLICT, "node 'u' is completed, not waiting_for_user")
    assert then(ex).callback("u", 1, "completed", None, None) == Result(
        Outcome.CONFLICT, "node 'u' is a UX node, not a Worker"
    )


# -- fan-out: Splitters, paths, Collectors -----------------------------------------------------


def test_a_fan_out_runs_each_element_on_its_own_path_and_collects_in_path_order() -> None:
    ex = started(fan())
    answer = then(ex)
    answer.callback("w", 1, "completed", {"items": [{"k": 1}, "two"]}, None)
    assert statuses(ex) == {
        "w": "completed",
        "s": "completed",
        "m": "pending",
        "n": "pending",
        "c": "pending",
        "after": "pending",
        "m_0": "running",
        "m_1": "running",
    }
    assert json_of(ex)["s"]["fanout"] == 2 and json_of(ex)["s"]["output"] == [{"k": 1}, "two"]
    assert json_of(ex)["m_1"] == {
        "status": "running",
        "output": None,
        "error": None,
        "node_id": "m",
        "path": [1],
        "attempt": 1,
        "input": "two",
        "updated_at": NOW,
    }
    assert answer.dispatches == [
        Dispatch("m_0", 1, W, payload("m_0", 1, {"k": 1})),
        Dispatch("m_1", 1, W, payload("m_1", 1, "two")),
    ]
    assert answer.events == [
        Event("w", "completed", 1, None, '{"items":[{"k":1},"two"]}'),
        Event("s", "completed", 1, None, '[{"k":1},"two"]'),
        Event("m_0", "running", 1),
        Event("m_1", "running", 1),
    ]
    assert template_summary(ex.run.nodes, "m") == {"status": "running", "paths": {"running": 2}}
    then(ex).callback("m_1", 1, "completed", "B", None)
    then(ex).callback("m_0", 1, "completed", "A", None)
    assert json_of(ex)["n_0"]["input"] == "A" and json_of(ex)["n_1"]["input"] == "B"
    assert then(ex).complete("n", 1) == Result(Outcome.NOT_FOUND, "run r1 has no node 'n'")  # a template
    then(ex).complete("n_1", "second")
    assert json_of(ex)["c"]["status"] == "pending"  # waits for every path
    last = then(ex)
    last.complete("n_0", "first")
    assert last.events == [
        Event("n_0", "completed", 1, None, "first"),
        Event("c", "completed", 1, None, '["first","second"]'),
        Event("after", "running", 1),
    ]
    gathered = ["first", "second"]
    assert last.attempts[("c", 1)] == AttemptChange(
        "c", 1, new=True, status="completed", output=gathered, finished=True
    )
    assert last.dispatches == [Dispatch("after", 1, W, payload("after", 1, ["first", "second"]))]
    assert template_summary(ex.run.nodes, "m") == {"status": "completed", "paths": {"completed": 2}}


def test_a_collector_right_after_its_splitter_gathers_the_array() -> None:
    ex = started(plan([node("s", "Splitter"), node("c", "Collector")], ("s", "c")), [3, 1, 2])
    assert statuses(ex) == {"s": "completed", "c": "completed"}
    assert ex.events == [Event("s", "completed", 1, None, "[3,1,2]"), Event("c", "completed", 1, None, "[3,1,2]")]
    assert json_of(ex)["c"]["output"] == [3, 1, 2]


def test_a_collector_merges_its_upstreams_on_each_path() -> None:
    p = plan(
        [node("s", "Splitter"), worker("a"), worker("b"), node("c", "Collector")],
        ("s", "a"),
        ("s", "b"),
        ("a", "c"),
        ("b", "c"),
    )
    ex = started(p, [0, 1])
    for key, out in (("a_0", {"a": 0}), ("b_0", 10), ("a_1", {"a": 1}), ("b_1", {"a": 9})):
        then(ex).callback(key, 1, "completed", out, None)
    assert json_of(ex)["c"]["output"] == [{"a": 0, "b": 10}, {"a": 9}]


def test_an_empty_array_closes_the_templates_and_the_collector_gets_nothing() -> None:
    ex = started(fan())
    answer = then(ex)
    answer.callback("w", 1, "completed", {"items": []}, None)
    assert statuses(ex) == {
        "w": "completed",
        "s": "completed",
        "m": "completed",
        "n": "completed",
        "c": "completed",
        "after": "running",
    }
    assert json_of(ex)["m"]["updated_at"] == NOW and json_of(ex)["s"]["fanout"] == 0
    assert [e.key for e in answer.events] == ["w", "s", "c", "after"]  # templates have no events
    assert answer.dispatches == [Dispatch("after", 1, W, payload("after", 1, []))]
    assert template_summary(ex.run.nodes, "m") == {"status": "completed", "paths": {}}


def test_an_empty_inner_array_closes_only_that_splitters_templates() -> None:
    ex = started(nested(), [[]])
    assert statuses(ex) == {
        "s1": "completed",
        "s2": "pending",
        "x": "completed",
        "c2": "pending",
        "c1": "completed",
        "s2_0": "completed",
        "c2_0": "completed",
    }
    assert json_of(ex)["c2_0"]["output"] == [] and json_of(ex)["c1"]["output"] == [[]]


def test_a_splitter_without_its_array_fails() -> None:
    ex = started(fan())
    answer = then(ex)
    answer.callback("w", 1, "completed", {"other": 1}, None)
    error = "Splitter 's': data.arrayPath 'items' does not exist in the input (stopped at 'items')"
    assert json_of(ex)["s"] == {
        "status": "failed",
        "output": None,
        "error": error,
        "node_id": "s",
        "path": [],
        "attempt": 1,
        "input": {"other": 1},
        "updated_at": NOW,
    }
    assert answer.events[1:] == [Event("s", "failed", 1, error)] and ex.run_status() == "failed"
    assert json_of(ex)["c"]["status"] == "pending"


def test_nested_fan_outs_fail_and_retry_per_path() -> None:
    """A failed path fails the Collectors over it (and only on its outer path); retrying it makes
    them pending again; they then gather in path order."""
    ex = started(nested(), [[1, 2], [3]])
    assert [(d.key, d.payload["input"]) for d in ex.dispatches] == [("x_0_0", 1), ("x_0_1", 2), ("x_1_0", 3)]
    assert json_of(ex)["x_0_1"]["path"] == [0, 1] and json_of(ex)["s2_1"]["fanout"] == 1
    failing = then(ex)
    failing.callback("x_1_0", 1, "failed", None, "boom")
    assert failing.events == [
        Event("x_1_0", "failed", 1, "boom"),
        Event("c2_1", "failed", 1, "path x_1_0 failed: boom"),
        Event("c1", "failed", 1, "path x_1_0 failed: boom"),
    ]
    assert failing.attempts[("c2_1", 1)] == AttemptChange(
        "c2_1", 1, new=True, status="failed", error="path x_1_0 failed: boom", finished=True
    )
    assert json_of(ex)["c2_1"] == {
        "status": "failed",
        "output": None,
        "error": "path x_1_0 failed: boom",
        "node_id": "c2",
        "path": [1],
        "attempt": 1,
        "input": None,
        "updated_at": NOW,
    }
    assert ex.run_status() == "running"
    then(ex).callback("x_0_1", 1, "completed", "b", None)
    answer = then(ex)
    answer.callback("x_0_0", 1, "completed", "a", None)
    assert answer.events == [
        Event("x_0_0", "completed", 1, None, "a"),
        Event("c2_0", "completed", 1, None, '["a","b"]'),
    ]
    assert json_of(ex)["c2_0"] == {
        "status": "completed",
        "output": ["a", "b"],
        "error": None,
        "node_id": "c2",
        "path": [0],
        "attempt": 1,
        "input": None,
        "updated_at": NOW,
    }
    assert template_summary(ex.run.nodes, "c2") == {"status": "failed", "paths": {"failed": 1, "completed": 1}}
    assert json_of(ex)["c1"]["attempt"] == 1 and ex.run_status() == "failed"
    retried = then(ex)
    assert retried.retry("x") == Result(Outcome.APPLIED, "x: 1 failed path(s) retried (x_1_0)")
    assert retried.events == [
        Event("x_1_0", "pending", 1),
        Event("c2_1", "pending", 1),
        Event("c1", "pending", 1),
        Event("x_1_0", "running", 2),
    ]
    assert retried.dispatches == [Dispatch("x_1_0", 2, W, payload("x_1_0", 2, 3))]
    assert then(ex).callback("x_1_0", 1, "completed", "c", None) == Result(
        Outcome.CONFLICT, "callback for attempt 1 of 'x_1_0', which is on attempt 2"
    )
    done = then(ex)
    done.callback("x_1_0", 2, "completed", "c", None)
    assert json_of(ex)["c1"]["output"] == [["a", "b"], ["c"]] and ex.run_status() == "completed"
    assert done.attempts[("c2_1", 2)] == AttemptChange(
        "c2_1", 2, new=True, status="completed", output=["c"], finished=True
    )


def test_an_inner_splitter_failing_fails_the_outer_collector() -> None:
    """Retried, each failed path fails again: every attempt of the Collector is recorded as failed."""
    ex = started(nested(), [[1], 5, 6])
    error = "Splitter 's2': the input is int, not an array"
    assert ex.events == [
        Event("s1", "completed", 1, None, "[[1],5,6]"),
        Event("s2_0", "completed", 1, None, "[1]"),
        Event("x_0_0", "running", 1),
        Event("s2_1", "failed", 1, error),
        Event("c1", "failed", 1, f"path s2_1 failed: {error}"),
        Event("s2_2", "failed", 1, error),
    ]
    assert "fanout" not in json_of(ex)["s2_1"]
    answer = then(ex)
    assert answer.retry("s2") == Result(Outcome.APPLIED, "s2: 2 failed path(s) retried (s2_1, s2_2)")
    c1_failed = AttemptChange("c1", 2, new=True, status="failed", error=f"path s2_1 failed: {error}", finished=True)
    assert answer.attempts[("c1", 2)] == c1_failed
    assert answer.attempts[("c1", 3)] == AttemptChange(
        "c1", 3, new=True, status="failed", error=f"path s2_1 failed: {error}", finished=True
    )


def test_an_inner_splitter_failing_later_fails_the_outer_collector_at_once() -> None:
    p = plan(
        [node("s1", "Splitter"), worker("w"), node("s2", "Splitter"), node("c2", "Collector"), node("c1", "Collector")],
        ("s1", "w"),
        ("w", "s2"),
        ("s2", "c2"),
        ("c2", "c1"),
    )
    ex = started(p, ["p", "q"])
    then(ex).callback("w_0", 1, "completed", [1, 2], None)
    assert json_of(ex)["c2_0"]["output"] == [1, 2] and json_of(ex)["c1"]["status"] == "pending"
    answer = then(ex)
    answer.callback("w_1", 1, "completed", 5, None)
    error = "Splitter 's2': the input is int, not an array"
    assert answer.events == [
        Event("w_1", "completed", 1, None, "5"),
        Event("s2_1", "failed", 1, error),
        Event("c1", "failed", 1, f"path s2_1 failed: {error}"),
    ]


def test_a_path_reads_its_element_and_its_other_upstreams() -> None:
    """s -> n and s -> m -> n: each path of n merges its element with m's output on that path."""
    p = plan([node("s", "Splitter"), worker("m"), worker("n")], ("s", "n"), ("s", "m"), ("m", "n"))
    ex = started(p, [{"e": 1}, {"e": 2}])
    assert statuses(ex) == {"s": "completed", "m": "pending", "n": "pending", "m_0": "running", "m_1": "running"}
    answer = then(ex)
    answer.callback("m_1", 1, "completed", 7, None)
    assert answer.dispatches == [Dispatch("n_1", 1, W, payload("n_1", 1, {"e": 2, "m": 7}))]


# -- manual retries -----------------------------------------------------------------------------


@pytest.mark.parametrize(("paths", "shown"), [(10, ""), (11, ", ...")])
def test_retrying_a_template_retries_its_failed_paths_naming_ten(paths: int, shown: str) -> None:
    ex = started(
        plan([node("s", "Splitter"), worker("m"), node("c", "Collector")], ("s", "m"), ("m", "c")), list(range(paths))
    )
    for i in range(paths):
        then(ex).callback(f"m_{i}", 1, "failed", None, "no")
    assert json_of(ex)["c"]["error"] == "path m_0 failed: no"
    answer = then(ex)
    assert answer.retry("m") == Result(
        Outcome.APPLIED, f"m: {paths} failed path(s) retried (m_0, m_1, m_2, m_3, m_4, m_5, m_6, m_7, m_8, m_9{shown})"
    )
    assert len(answer.dispatches) == paths and json_of(ex)["c"]["status"] == "pending"
    assert then(ex).retry("m") == Result(Outcome.BAD_REQUEST, "node 'm' has no failed paths to retry")


def test_retrying_a_template_leaves_its_other_paths() -> None:
    ex = started(plan([node("s", "Splitter"), worker("m"), node("c", "Collector")], ("s", "m"), ("m", "c")), [0, 1, 2])
    then(ex).callback("m_0", 1, "completed", 0, None)
    then(ex).callback("m_1", 1, "failed", None, "no")
    then(ex).callback("m_2", 1, "failed", None, "no")
    assert then(ex).retry("m") == Result(Outcome.APPLIED, "m: 2 failed path(s) retried (m_1, m_2)")
    assert statuses(ex) == {
        "s": "completed",
        "m": "pending",
        "c": "pending",
        "m_0": "completed",
        "m_1": "running",
        "m_2": "running",
    }


def test_retrying_one_path_resets_the_failed_collector_once() -> None:
    ex = started(plan([node("s", "Splitter"), worker("m"), node("c", "Collector")], ("s", "m"), ("m", "c")), [0, 1])
    then(ex).callback("m_0", 1, "failed", None, "no")
    then(ex).callback("m_1", 1, "failed", None, "no")
    first = then(ex)
    assert first.retry("m_0") == Result(Outcome.APPLIED, "m_0 retried")
    assert first.events == [Event("m_0", "pending", 1), Event("c", "pending", 1), Event("m_0", "running", 2)]
    second = then(ex)
    second.retry("m_1")
    assert second.events == [Event("m_1", "pending", 1), Event("m_1", "running", 2)]  # c is pending already
    then(ex).callback("m_0", 2, "completed", "A", None)
    assert json_of(ex)["c"]["status"] == "pending"  # m_1 is running again: c waits for it
    then(ex).callback("m_1", 2, "completed", "B", None)
    assert json_of(ex)["c"]["output"] == ["A", "B"] and json_of(ex)["c"]["attempt"] == 2


def test_only_failed_nodes_can_be_retried() -> None:
    ex = started(plan([worker("a"), worker("b", retry=RETRY)]))
    assert then(ex).retry("zz") == Result(Outcome.NOT_FOUND, "run r1 has no node 'zz'")
    assert then(ex).retry("a") == Result(Outcome.BAD_REQUEST, "node 'a' is running; only failed nodes can be retried")
    then(ex).callback("b", 1, "failed", None, "no")
    assert then(ex).retry("b") == Result(
        Outcome.BAD_REQUEST, "node 'b' is retrying (an automatic retry is scheduled); only failed nodes can be retried"
    )
    then(ex).callback("a", 1, "failed", None, "no")
    answer = then(ex)
    assert answer.retry("a") == Result(Outcome.APPLIED, "a retried")
    assert answer.events == [Event("a", "pending", 1), Event("a", "running", 2)]
    assert "budget_from" not in json_of(ex)["a"] and json_of(ex)["a"]["error"] is None


# -- the retry policy and deadlines -------------------------------------------------------------


def fail(ex: Execution, attempt: int, error: str, at: float) -> Execution:
    answer = then(ex, at=at)
    assert answer.callback("a", attempt, "failed", None, error) == Result(Outcome.APPLIED, "a failed")
    return answer


def test_a_policy_retries_automatically_with_growing_delays_until_its_budget_is_spent() -> None:
    ex = started(plan([worker("a", retry=RETRY, timeoutSeconds=30)]), "in")
    assert json_of(ex)["a"]["budget_from"] == 1
    first = then(ex, at=1010)
    assert first.callback("a", 1, "failed", {"partial": 1}, "e1") == Result(Outcome.APPLIED, "a failed")
    assert (
        json_of(ex)["a"]["status"] == "retrying" and json_of(ex)["a"]["error"] == "e1" and ex.run_status() == "running"
    )
    assert json_of(ex)["a"]["output"] == {"partial": 1}
    assert first.timers == [Timer("a", 1, "retry", 1015.0)] and first.timers_done == [("a", 1, "timeout")]
    assert first.events == [Event("a", "retrying", 1, "e1")]
    assert first.attempts == {
        ("a", 1): AttemptChange("a", 1, new=False, status="failed", output={"partial": 1}, error="e1", finished=True)
    }
    assert then(ex).callback("a", 1, "failed", None, "e1").outcome is Outcome.DUPLICATE
    assert then(ex).callback("a", 1, "failed", None, "e9") == Result(
        Outcome.CONFLICT, "node 'a' is retrying, not running"
    )
    assert then(ex).fire_timer("a", 1, "timeout") == Result(Outcome.DUPLICATE, "a is retrying; nothing changed")
    due = then(ex, at=1015)
    assert due.fire_timer("a", 1, "retry") == Result(Outcome.APPLIED, "a retried automatically (attempt 2)")
    assert due.dispatches == [Dispatch("a", 2, W, payload("a", 2, "in", retry=RETRY, timeoutSeconds=30))]
    assert due.timers == [Timer("a", 2, "timeout", 1045.0)]
    assert due.attempts == {("a", 2): AttemptChange("a", 2, new=True, input="in")}
    assert json_of(ex)["a"]["budget_from"] == 1 and json_of(ex)["a"]["input"] == "in"
    assert then(ex).fire_timer("a", 1, "retry") == Result(
        Outcome.DUPLICATE, "a has moved on from attempt 1; nothing changed"
    )
    assert fail(ex, 2, "e2", at=1020).timers == [Timer("a", 2, "retry", 1035.0)]  # 5 s * 3
    then(ex, at=1035).fire_timer("a", 2, "retry")
    last = fail(ex, 3, "e3", at=1040)
    assert last.timers == [] and json_of(ex)["a"]["status"] == "failed" and ex.run_status() == "failed"
    assert last.attempts[("a", 3)].status == "failed"
    assert then(ex).fire_timer("a", 3, "retry") == Result(Outcome.DUPLICATE, "a is failed; nothing changed")
    assert then(ex).callback("a", 3, "failed", None, "e3").outcome is Outcome.DUPLICATE

    manual = then(ex, at=1100)  # a manual retry starts a new budget at its own attempt
    assert manual.retry("a") == Result(Outcome.APPLIED, "a retried")
    assert json_of(ex)["a"]["budget_from"] == 4 and manual.timers == [Timer("a", 4, "timeout", 1130.0)]
    assert fail(ex, 4, "e4", at=1110).timers == [Timer("a", 4, "retry", 1115.0)]


def test_a_run_stored_before_budgets_counts_from_the_first_attempt() -> None:
    p = plan([worker("a", retry={"maxAttempts": 3, "backoffSeconds": 2})])
    states = node_states_json(initial_states(p))
    states["a"].update(status="running", attempt=2)  # no budget_from
    answer = fail(new(p, states), 2, "e", at=1000)
    assert answer.timers == [Timer("a", 2, "retry", 1004.0)]  # the second failure: 2 s * 2


def test_a_deadline_fails_the_attempt_naming_its_limit() -> None:
    ex = started(plan([worker("a", timeoutSeconds=2.5), worker("b")], ("a", "b")))
    assert ex.timers == [Timer("a", 1, "timeout", 1002.5)]
    answer = then(ex, at=1002.5)
    assert answer.fire_timer("a", 1, "timeout") == Result(Outcome.APPLIED, "a timed out")
    error = "timeout: no callback within 2.5 s (attempt 1)"
    assert json_of(ex)["a"]["error"] == error and answer.events == [Event("a", "failed", 1, error)]
    assert then(ex).callback("a", 1, "completed", 1, None) == Result(
        Outcome.CONFLICT, "node 'a' is failed, not running"
    )
    assert then(ex).fire_timer("a", 1, "timeout") == Result(Outcome.DUPLICATE, "a is failed; nothing changed")
    assert then(ex).fire_timer("zz", 1, "timeout") == Result(
        Outcome.DUPLICATE, "zz has moved on from attempt 1; nothing changed"
    )
    assert then(ex).fire_timer("b", 0, "timeout") == Result(Outcome.DUPLICATE, "b is pending; nothing changed")

    default = started(plan([worker("a")]), node_timeout=60)
    then(default).fire_timer("a", 1, "timeout")
    assert json_of(default)["a"]["error"] == "timeout: no callback within 60 s (attempt 1)"
    unset = started(plan([worker("a")]))
    then(unset).fire_timer("a", 1, "timeout")
    assert json_of(unset)["a"]["error"] == "timeout: no callback before its deadline (attempt 1)"


def test_timers_of_templates_and_answered_attempts_change_nothing() -> None:
    ex = started(fan(), node_timeout=60)
    assert then(ex).fire_timer("m", 0, "timeout") == Result(
        Outcome.DUPLICATE, "m has moved on from attempt 0; nothing changed"
    )
    then(ex).callback("w", 1, "completed", {"items": [1]}, None)
    assert then(ex).fire_timer("w", 1, "timeout") == Result(Outcome.DUPLICATE, "w is completed; nothing changed")
    assert then(ex).fire_timer("m_0", 1, "retry") == Result(Outcome.DUPLICATE, "m_0 is running; nothing changed")


# -- cancelling ---------------------------------------------------------------------------------


def test_cancel_ends_every_unfinished_path_and_refuses_what_follows() -> None:
    ex = started(fan())
    then(ex).callback("w", 1, "completed", {"items": ["a", "b"]}, None)
    then(ex).callback("m_1", 1, "completed", "B", None)
    answer = then(ex)
    assert answer.cancel() == Result(Outcome.APPLIED, "run r1 cancelled")
    assert statuses(ex) == {
        "w": "completed",
        "s": "completed",
        "m": "cancelled",
        "n": "cancelled",
        "c": "cancelled",
        "after": "cancelled",
        "m_0": "cancelled",
        "m_1": "completed",
        "n_1": "cancelled",
    }
    assert json_of(ex)["m"] == {
        "status": "cancelled",
        "output": None,
        "error": None,
        "node_id": "m",
        "path": None,
        "attempt": 0,
        "input": None,
        "updated_at": NOW,
    }
    assert json_of(ex)["m_0"]["error"] == CANCELLED_ERROR == "the run was cancelled"
    assert answer.events == [
        Event("c", "cancelled", 0, CANCELLED_ERROR),
        Event("after", "cancelled", 0, CANCELLED_ERROR),
        Event("m_0", "cancelled", 1, CANCELLED_ERROR),
        Event("n_1", "cancelled", 1, CANCELLED_ERROR),
    ]
    assert answer.attempts == {
        ("m_0", 1): AttemptChange("m_0", 1, new=False, status="cancelled", error=CANCELLED_ERROR, finished=True),
        ("n_1", 1): AttemptChange("n_1", 1, new=False, status="cancelled", error=CANCELLED_ERROR, finished=True),
    }
    assert ex.run_status() == "cancelled" and ex.cancelled()
    assert template_summary(ex.run.nodes, "m") == {"status": "cancelled", "paths": {"cancelled": 1, "completed": 1}}
    refused = Result(Outcome.CONFLICT, "run r1 is cancelled; start a new run instead")
    assert then(ex).cancel() == Result(Outcome.DUPLICATE, "run r1 was already cancelled; nothing changed")
    assert (
        then(ex).complete("n_1", 1) == refused and then(ex).retry("m_0") == refused and then(ex).retry("m") == refused
    )
    assert then(ex).callback("m_0", 1, "completed", 1, None) == Result(
        Outcome.CONFLICT, "node 'm_0' is cancelled, not running"
    )
    assert then(ex).callback("m_0", 1, "failed", None, CANCELLED_ERROR).outcome is Outcome.CONFLICT


def test_cancel_keeps_failed_nodes_and_ends_a_scheduled_retry() -> None:
    ex = started(plan([worker("a", retry=RETRY), worker("b")]))
    then(ex).callback("a", 1, "failed", None, "no")
    then(ex).callback("b", 1, "failed", None, "no")
    answer = then(ex)
    assert answer.cancel().outcome is Outcome.APPLIED
    assert statuses(ex) == {"a": "cancelled", "b": "failed"}
    assert answer.events == [Event("a", "cancelled", 1, CANCELLED_ERROR)] and answer.attempts == {}


def test_states_stored_without_an_attempt_count_start_from_zero() -> None:
    p = plan([worker("a"), worker("b")], ("a", "b"))
    states = {
        key: {k: v for k, v in state.items() if k != "attempt"}
        for key, state in node_states_json(initial_states(p)).items()
    }
    ex = new(p, states)
    ex.start()
    assert json_of(ex)["a"]["attempt"] == 1 and ex.events == [Event("a", "running", 1)]
    cancelling = then(ex)
    cancelling.cancel()
    assert cancelling.events == [
        Event("a", "cancelled", 1, CANCELLED_ERROR),
        Event("b", "cancelled", 0, CANCELLED_ERROR),
    ]


def test_only_running_or_waiting_runs_can_be_cancelled() -> None:
    for settled in ("completed", "failed"):
        ex = started(plan([worker("a")]))
        then(ex).callback("a", 1, settled, None, None)
        assert then(ex).cancel() == Result(
            Outcome.CONFLICT, f"run r1 is {settled}; only running or waiting runs can be cancelled"
        )
    waiting = started(plan([node("u", "UX")]))
    assert then(waiting).cancel() == Result(Outcome.APPLIED, "run r1 cancelled") and statuses(waiting) == {
        "u": "cancelled"
    }


@pytest.mark.parametrize(
    ("seen", "status"),
    [
        (["completed", "running", "cancelled"], "cancelled"),
        (["completed", "running"], "running"),
        (["failed", "retrying"], "running"),
        (["failed", "waiting_for_user"], "waiting_for_user"),
        (["completed", "failed"], "failed"),
        (["completed", "completed"], "completed"),
    ],
)
def test_the_run_status_follows_its_nodes(seen: list[str], status: str) -> None:
    ex = new(plan([worker("a")]), {f"k{i}": {"status": s} for i, s in enumerate(seen)})
    assert ex.run_status() == status
    assert ex.cancelled() is (status == "cancelled")


# -- the tally: counted as states change, equal to a count over all of them ----------------------
def wide() -> Plan:
    """s -> a -> b -> c (Collector, inputs b and s) -> after; a has a retry policy."""
    return plan(
        [node("s", "Splitter"), worker("a", retry={"maxAttempts": 2, "backoffSeconds": 1}), worker("b")]
        + [node("c", "Collector"), worker("after")],
        ("s", "a"),
        ("a", "b"),
        ("b", "c"),
        ("s", "c"),
        ("c", "after"),
    )


def counted(tally: Tally) -> tuple[dict[str, int], dict[str, list[int]]]:
    return {s: n for s, n in tally.statuses.items() if n}, tally.gather


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(["fan", "nested", "wide"]),
    widths=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    moves=st.lists(
        st.tuples(st.sampled_from(["ok", "fail", "retry", "timer", "cancel"]), st.integers(0, 50)), max_size=40
    ),
)
def test_the_tally_kept_event_by_event_equals_a_count_of_all_states(
    shape: str, widths: list[int], moves: list[tuple[str, int]]
) -> None:
    p = {"fan": fan, "nested": nested, "wide": wide}[shape]()
    run_input: Any = {"items": list(range(widths[0]))} if shape == "fan" else [list(range(w)) for w in widths]
    if shape == "wide":
        run_input = list(range(widths[0]))
    ex = started(p, run_input)
    if shape == "fan":
        then(ex).callback("w", 1, "completed", run_input, None)
    for move, pick in moves:
        assert counted(ex.run.tally) == counted(recount(p, ex.run.nodes)), move
        assert ex.run_status() == Execution(RunState("r1", None, dict(ex.run.nodes)), p, url, NOW).run_status()
        states = sorted(ex.run.nodes.items())
        open_ = [(k, s) for k, s in states if s.path is not None and s.status in ("running", "waiting_for_user")]
        failed = [(k, s) for k, s in states if s.path is not None and s.status == "failed"]
        retrying = [(k, s) for k, s in states if s.status == "retrying"]
        event = then(ex)
        if move in ("ok", "fail") and open_:
            key, state = open_[pick % len(open_)]
            if state.status == "waiting_for_user":
                event.complete(key, pick) if move == "ok" else event.cancel()
            else:
                event.callback(key, state.attempt, "completed" if move == "ok" else "failed", pick, "boom")
        elif move == "retry" and failed:
            event.retry(failed[pick % len(failed)][0])
        elif move == "timer" and retrying:
            key, state = retrying[pick % len(retrying)]
            event.fire_timer(key, state.attempt, "retry")
        elif move == "cancel" and pick % 10 == 0:
            event.cancel()
    assert counted(ex.run.tally) == counted(recount(p, ex.run.nodes))
