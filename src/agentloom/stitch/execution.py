"""What one event does to one run: pure logic over ``node_states``, no I/O.

The database layer loads a run under a lock, applies one event here, and commits the new
states together with the webhooks to send (the outbox). Every decision is made from the
states alone, so a replayed or late event is recognised and changes nothing.

Input merge rule: a node with one upstream receives that node's output unchanged (a path
after a Splitter receives its array element). With several upstreams, object outputs are
merged key by key in edge order (a later edge wins a clash) and any other output is placed
under its upstream node's id. Root nodes receive the run's input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from agentloom.stitch.graph import Plan, instance_key
from agentloom.stitch.models import NodeType, Status

CallbackUrl = Callable[[str, str, int], str]  # (run_id, key, attempt) -> signed URL


class Outcome(Enum):
    """What an event did, and the HTTP status it answers with."""

    APPLIED = (200, "applied")
    DUPLICATE = (200, "duplicate")  # a replay: answered 200, nothing changed
    BAD_REQUEST = (400, "bad request")
    NOT_FOUND = (404, "not found")
    CONFLICT = (409, "conflict")

    @property
    def http_status(self) -> int:
        return self.value[0]


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    message: str


@dataclass(frozen=True)
class Dispatch:
    key: str
    attempt: int
    url: str
    payload: dict[str, Any]


@dataclass
class Execution:
    run_id: str
    plan: Plan
    states: dict[str, dict[str, Any]]
    run_input: Any
    callback_url: CallbackUrl
    now: str
    dispatches: list[Dispatch] = field(default_factory=list)
    events: list[tuple[str, str, int]] = field(default_factory=list)  # (key, status, attempt)

    # -- events ------------------------------------------------------------------
    def start(self) -> None:
        for node_id in self.plan.roots:
            self._try_fire(node_id, ())

    def callback(self, key: str, attempt: int, status: str, output: Any, error: str | None) -> Result:
        state = self.states.get(key)
        if state is None or state.get("path") is None:
            return Result(Outcome.NOT_FOUND, f"run {self.run_id} has no node {key!r}")
        if self.plan.kind(state["node_id"]) is not NodeType.WORKER:
            return Result(Outcome.CONFLICT, f"node {key!r} is a {self.plan.kind(state['node_id'])} node, not a Worker")
        if attempt != state["attempt"]:
            return Result(
                Outcome.CONFLICT, f"callback for attempt {attempt} of {key!r}, which is on attempt {state['attempt']}"
            )
        if state["status"] == Status.RUNNING:
            path = tuple(state["path"])
            if status == Status.COMPLETED:
                self._set(key, state, Status.COMPLETED, output=output)
                self._walk(state["node_id"], path)
            else:
                self._set(key, state, Status.FAILED, output=output, error=error or "the worker reported a failure")
                self._failed(state["node_id"], path)
            return Result(Outcome.APPLIED, f"{key} {status}")
        if state["status"] == status:
            return Result(Outcome.DUPLICATE, f"{key} was already {status} by this attempt; nothing changed")
        return Result(Outcome.CONFLICT, f"node {key!r} is {state['status']}, not running")

    def complete(self, key: str, output: Any) -> Result:
        state = self.states.get(key)
        if state is None or state.get("path") is None:
            return Result(Outcome.NOT_FOUND, f"run {self.run_id} has no node {key!r}")
        if self.plan.kind(state["node_id"]) is not NodeType.UX:
            return Result(Outcome.BAD_REQUEST, f"node {key!r} is a {self.plan.kind(state['node_id'])} node; only UX nodes are completed by hand")
        if state["status"] != Status.WAITING_FOR_USER:
            return Result(Outcome.CONFLICT, f"node {key!r} is {state['status']}, not waiting_for_user")
        self._set(key, state, Status.COMPLETED, output=output)
        self._walk(state["node_id"], tuple(state["path"]))
        return Result(Outcome.APPLIED, f"{key} completed")

    def retry(self, key: str) -> Result:
        state = self.states.get(key)
        if state is None or state.get("path") is None:
            return Result(Outcome.NOT_FOUND, f"run {self.run_id} has no node {key!r}")
        if state["status"] != Status.FAILED:
            return Result(Outcome.BAD_REQUEST, f"node {key!r} is {state['status']}; only failed nodes can be retried")
        node_id, path = state["node_id"], tuple(state["path"])
        self._set(key, state, Status.PENDING)
        for collector in self.plan.collectors_over(node_id):  # they failed because of this path
            outer = path[: len(self.plan.scope[collector])]
            gathered = self.states.get(instance_key(collector, outer))
            if gathered is not None and gathered["status"] == Status.FAILED:
                self._set(instance_key(collector, outer), gathered, Status.PENDING)
        self._try_fire(node_id, path)
        return Result(Outcome.APPLIED, f"{key} retried")

    def dispatch_failed(self, key: str, attempt: int, reason: str) -> Result:
        state = self.states.get(key)
        if state is None or state["attempt"] != attempt or state["status"] != Status.RUNNING:
            return Result(Outcome.DUPLICATE, "the node has moved on; nothing changed")
        self._set(key, state, Status.FAILED, error=reason)
        self._failed(state["node_id"], tuple(state["path"]))
        return Result(Outcome.APPLIED, f"{key} failed: {reason}")

    def run_status(self) -> str:
        seen = {s["status"] for s in self.states.values()}
        for status in (Status.RUNNING, Status.WAITING_FOR_USER, Status.FAILED):
            if status in seen:
                return str(status)
        return "completed"

    # -- edge walking ------------------------------------------------------------
    def _walk(self, node_id: str, path: tuple[int, ...]) -> None:
        plan = self.plan
        if plan.kind(node_id) is NodeType.SPLITTER:
            fanout = self.states[instance_key(node_id, path)]["fanout"]
            for target in plan.downstream[node_id]:
                if plan.closes.get(target) != node_id:
                    for i in range(fanout):
                        self._try_fire(target, (*path, i))
            for collector in plan.collectors_of(node_id):  # with an empty array they fire now, with []
                self._try_fire(collector, path)
            return
        for target in plan.downstream[node_id]:
            self._try_fire(target, path[: len(plan.scope[target])])

    def _failed(self, node_id: str, path: tuple[int, ...]) -> None:
        for collector in self.plan.collectors_over(node_id):
            self._try_fire(collector, path[: len(self.plan.scope[collector])])

    def _try_fire(self, node_id: str, path: tuple[int, ...]) -> None:
        key = instance_key(node_id, path)
        state = self.states.get(key)
        if state is not None and state["status"] != Status.PENDING:
            return  # fired already: a replayed event must not fire it twice
        if self.plan.kind(node_id) is NodeType.COLLECTOR:
            self._try_collect(node_id, path, key, state)
            return
        value = self._input(node_id, path)
        if value is not _WAIT:
            self._fire(node_id, path, key, state, value)

    def _input(self, node_id: str, path: tuple[int, ...]) -> Any:
        """The merged upstream outputs at ``path`` (a Collector reads each of its inner paths)."""
        upstream = self.plan.upstream[node_id]
        if not upstream:
            return self.run_input
        parts = []
        for source in upstream:
            if self.plan.kind(source) is NodeType.SPLITTER:  # a path reads its element of the array
                split = self.states.get(instance_key(source, path[:-1]))
                if split is None or split["status"] != Status.COMPLETED:
                    return _WAIT
                parts.append((source, split["output"][path[-1]]))
                continue
            done = self.states.get(instance_key(source, path))
            if done is None or done["status"] != Status.COMPLETED:
                return _WAIT
            parts.append((source, done["output"]))
        return merge(parts)

    def _try_collect(self, node_id: str, path: tuple[int, ...], key: str, state: dict[str, Any] | None) -> None:
        splitter = self.plan.closes[node_id]
        split = self.states.get(instance_key(splitter, path))
        if split is None or split["status"] != Status.COMPLETED:
            return
        members = self.plan.inside[node_id]
        depth = len(path)
        for other_key, other in self.states.items():
            other_path = other.get("path")
            if (
                other["status"] == Status.FAILED
                and other["node_id"] in members
                and other_path is not None
                and tuple(other_path[:depth]) == path
            ):
                self._set(key, state or self._new(node_id, path), Status.FAILED, error=f"path {other_key} failed: {other.get('error')}")
                return
        gathered = []
        for i in range(split["fanout"]):
            value = self._input(node_id, (*path, i))
            if value is _WAIT:
                return
            gathered.append(value)
        fresh = state or self._new(node_id, path)
        fresh["attempt"] = fresh.get("attempt", 0) + 1
        self._set(key, fresh, Status.COMPLETED, output=gathered)
        self._walk(node_id, path)

    def _fire(self, node_id: str, path: tuple[int, ...], key: str, state: dict[str, Any] | None, value: Any) -> None:
        node = self.plan.nodes[node_id]
        fresh = state or self._new(node_id, path)
        fresh["attempt"] = fresh.get("attempt", 0) + 1
        fresh["input"] = value
        if node.type is NodeType.WORKER:
            self._set(key, fresh, Status.RUNNING)
            url = self.callback_url(self.run_id, key, fresh["attempt"])
            payload = {"runId": self.run_id, "nodeId": key, "config": node.data, "input": value, "callbackUrl": url}
            self.dispatches.append(Dispatch(key, fresh["attempt"], node.data["webhookUrl"], payload))
        elif node.type is NodeType.UX:
            self._set(key, fresh, Status.WAITING_FOR_USER)
        elif node.type is NodeType.SPLITTER:
            items, problem = extract_array(value, node.data.get("arrayPath"))
            if problem:
                self._set(key, fresh, Status.FAILED, error=f"Splitter {node_id!r}: {problem}")
                self._failed(node_id, path)
                return
            fresh["fanout"] = len(items)
            self._set(key, fresh, Status.COMPLETED, output=items)
            self._walk(node_id, path)

    def _new(self, node_id: str, path: tuple[int, ...]) -> dict[str, Any]:
        return {"status": Status.PENDING.value, "output": None, "error": None, "node_id": node_id,
                "path": list(path), "attempt": 0, "input": None}

    def _set(self, key: str, state: dict[str, Any], status: Status, *, output: Any = None, error: str | None = None) -> None:
        state.update(status=status.value, output=output, error=error, updated_at=self.now)
        self.states[key] = state
        self.events.append((key, status.value, state.get("attempt", 0)))


_WAIT = object()


def merge(parts: list[tuple[str, Any]]) -> Any:
    if len(parts) == 1:
        return parts[0][1]
    merged: dict[str, Any] = {}
    for source, value in parts:
        if isinstance(value, dict):
            merged.update(value)
        else:
            merged[source] = value
    return merged


def extract_array(value: Any, array_path: str | None) -> tuple[list[Any], str | None]:
    """The array a Splitter fans out: ``value`` itself, or the dotted ``arrayPath`` inside it."""
    current = value
    for part in (array_path or "").split(".") if array_path else []:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return [], f"data.arrayPath {array_path!r} does not exist in the input (stopped at {part!r})"
    if not isinstance(current, list):
        where = f"data.arrayPath {array_path!r}" if array_path else "the input"
        return [], f"{where} is {type(current).__name__}, not an array"
    return current, None


def initial_states(plan: Plan) -> dict[str, dict[str, Any]]:
    """Every node pending (REQ-2.6). Nodes on fan-out paths get one entry per path when they fire;
    their plain entry stays a pending template (``path`` null)."""
    return {
        node_id: {"status": Status.PENDING.value, "output": None, "error": None, "node_id": node_id,
                  "path": [] if not plan.scope[node_id] else None, "attempt": 0, "input": None}
        for node_id in plan.nodes
    }
