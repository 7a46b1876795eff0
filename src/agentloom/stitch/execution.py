"""What one event does to one run: pure logic over its node states (:mod:`state`), no I/O.

The database layer loads a run under a lock, applies one event here, and commits the new
states together with the webhooks to send (the outbox). Every decision is made from the
states alone, so a replayed or late event is recognised and changes nothing.

What each node receives follows the input merge rule in :mod:`inputs`.

Besides the new states, an event reports what the engine writes with them: webhooks to send,
event rows, attempt history (every attempt of every node path) and timers (a Worker's
deadline, an automatic retry's due time). Time comes in as ``at`` (epoch seconds), so the
logic stays pure and tests move the clock instead of sleeping.

What would need every state of the run is counted as it changes instead (:class:`Tally`): the
run's status from a count per status, a Collector's readiness from its inputs completed, its
member paths failed and what it needs. An event on one path of a wide fan-out reads and writes
that path and those counts, however many paths its run has.

Retry policy (a Worker's ``data.retry``): a failure with attempts left in the budget makes the
node ``retrying``, not ``failed``; Collectors wait for it as for a running node. A manual
retry after the policy gave up starts a new budget (``budget_from``: its first attempt).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from agentloom.stitch.graph import Plan, instance_key
from agentloom.stitch.inputs import extract_array, merge
from agentloom.stitch.models import NodeType, Status
from agentloom.stitch.state import NodeState, RunState, Tally

CallbackUrl = Callable[[str, str, int], str]  # (run_id, key, attempt) -> signed URL

EVENT_ERROR_CHARS = 500  # an event row keeps at most this much of the node's error
SUMMARY_CHARS = 200  # and this much of its output's JSON
OPEN = frozenset({Status.RUNNING, Status.WAITING_FOR_USER})  # an attempt still under way
CANCELLABLE = frozenset({Status.RUNNING, Status.WAITING_FOR_USER, Status.RETRYING, Status.PENDING})
CANCELLED_ERROR = "the run was cancelled"
# A template's status is the worst of its paths' statuses, in this order.
TEMPLATE_ORDER = (
    Status.RUNNING,
    Status.RETRYING,
    Status.WAITING_FOR_USER,
    Status.PENDING,
    Status.FAILED,
    Status.CANCELLED,
    Status.COMPLETED,
)


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

    def reply(self) -> dict[str, Any]:
        """The HTTP answer's body: ``{ok, detail, duplicate}``."""
        return {
            "ok": self.outcome in (Outcome.APPLIED, Outcome.DUPLICATE),
            "detail": self.message,
            "duplicate": self.outcome is Outcome.DUPLICATE,
        }


@dataclass(frozen=True)
class Dispatch:
    key: str
    attempt: int
    url: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Event:
    key: str
    status: str
    attempt: int
    error: str | None = None  # bounded (EVENT_ERROR_CHARS)
    summary: str | None = None  # a bounded excerpt of the output's JSON (SUMMARY_CHARS)


@dataclass
class AttemptChange:
    """One attempt's row in the history: inserted when ``new`` (it started in this event), else updated."""

    key: str
    attempt: int
    new: bool
    status: str = Status.RUNNING.value  # a retrying node's attempt ended 'failed'
    input: Any = None
    output: Any = None
    error: str | None = None
    finished: bool = False


@dataclass(frozen=True)
class Timer:
    key: str
    attempt: int
    kind: str  # 'timeout' (a Worker's deadline) | 'retry' (an automatic retry comes due)
    due_at: float  # epoch seconds


@dataclass
class Execution:
    run: RunState
    plan: Plan
    callback_url: CallbackUrl
    now: str
    at: float = 0.0  # the event's moment in epoch seconds (timers are due relative to it)
    node_timeout: float | None = None  # a Worker's deadline when its data.timeoutSeconds is unset
    dispatches: list[Dispatch] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    attempts: dict[tuple[str, int], AttemptChange] = field(default_factory=dict)
    timers: list[Timer] = field(default_factory=list)  # to write
    timers_done: list[tuple[str, int, str]] = field(default_factory=list)  # (key, attempt, kind) to delete
    tally: Tally = field(init=False)

    def __post_init__(self) -> None:
        if self.run.tally is None:  # a run stored before tallies: counted once, from all its states
            self.run.tally = recount(self.plan, self.run.nodes)
        self.tally = self.run.tally

    # -- events ------------------------------------------------------------------
    def start(self) -> None:
        for node_id in self.plan.roots:
            self._try_fire(node_id, ())

    def callback(self, key: str, attempt: int, status: str, output: Any, error: str | None) -> Result:
        state = self.run.nodes.get(key)
        if state is None or state.path is None:
            return Result(Outcome.NOT_FOUND, f"run {self.run.id} has no node {key!r}")
        if self.plan.kind(state.node_id) is not NodeType.WORKER:
            return Result(Outcome.CONFLICT, f"node {key!r} is a {self.plan.kind(state.node_id)} node, not a Worker")
        if attempt != state.attempt:
            return Result(
                Outcome.CONFLICT, f"callback for attempt {attempt} of {key!r}, which is on attempt {state.attempt}"
            )
        error = error or "the worker reported a failure"
        if state.status == Status.RUNNING:
            self._end_deadline(key, state)
            if status == Status.COMPLETED:
                self._set(key, state, Status.COMPLETED, output=output)
                self._walk(state.node_id, state.fan_path)
            else:
                self._fail(key, state, error, output=output)
            return Result(Outcome.APPLIED, f"{key} {status}")
        if state.status == status == Status.COMPLETED or (
            # a repeat of the failure this attempt reported (not a late answer after its deadline)
            status == Status.FAILED and state.status in (Status.FAILED, Status.RETRYING) and state.error == error
        ):
            return Result(Outcome.DUPLICATE, f"{key} was already {status} by this attempt; nothing changed")
        return Result(Outcome.CONFLICT, f"node {key!r} is {state.status}, not running")

    def complete(self, key: str, output: Any) -> Result:
        state = self.run.nodes.get(key)
        if state is None or state.path is None:
            return Result(Outcome.NOT_FOUND, f"run {self.run.id} has no node {key!r}")
        if self.plan.kind(state.node_id) is not NodeType.UX:
            return Result(
                Outcome.BAD_REQUEST,
                f"node {key!r} is a {self.plan.kind(state.node_id)} node; only UX nodes are completed by hand",
            )
        if self.cancelled():
            return self._refused_cancelled()
        if state.status != Status.WAITING_FOR_USER:
            return Result(Outcome.CONFLICT, f"node {key!r} is {state.status}, not waiting_for_user")
        self._set(key, state, Status.COMPLETED, output=output)
        self._walk(state.node_id, state.fan_path)
        return Result(Outcome.APPLIED, f"{key} completed")

    def retry(self, key: str) -> Result:
        """Fire a failed node path again (a new attempt, a new retry budget). On a fan-out
        template key (``sq`` for ``sq_0``, ``sq_1``, ...) every failed path of it."""
        state = self.run.nodes.get(key)
        if state is None or (state.path is None and not self.plan.scope.get(key)):
            return Result(Outcome.NOT_FOUND, f"run {self.run.id} has no node {key!r}")
        if self.cancelled():
            return self._refused_cancelled()
        if state.path is None:
            failed = [
                k
                for k, s in self.run.nodes.items()
                if s.node_id == key and s.path is not None and s.status == Status.FAILED
            ]
            if not failed:
                return Result(Outcome.BAD_REQUEST, f"node {key!r} has no failed paths to retry")
            for path_key in failed:
                self._retry_path(path_key, self.run.nodes[path_key])
            shown_keys = ", ".join(failed[:10]) + (", ..." if len(failed) > 10 else "")
            return Result(Outcome.APPLIED, f"{key}: {len(failed)} failed path(s) retried ({shown_keys})")
        if state.status != Status.FAILED:
            hint = " (an automatic retry is scheduled)" if state.status == Status.RETRYING else ""
            return Result(
                Outcome.BAD_REQUEST, f"node {key!r} is {state.status}{hint}; only failed nodes can be retried"
            )
        self._retry_path(key, state)
        return Result(Outcome.APPLIED, f"{key} retried")

    def _retry_path(self, key: str, state: NodeState) -> None:
        node_id, path = state.node_id, state.fan_path
        self._set(key, state, Status.PENDING)
        for collector in self.plan.collectors_over(node_id):  # they failed because of this path
            outer = path[: len(self.plan.scope[collector])]
            gathered = self.run.nodes.get(instance_key(collector, outer))
            if gathered is not None and gathered.status == Status.FAILED:
                self._set(instance_key(collector, outer), gathered, Status.PENDING)
        self._try_fire(node_id, path)

    def dispatch_failed(self, key: str, attempt: int, reason: str) -> Result:
        state = self.run.nodes.get(key)
        if state is None or state.attempt != attempt or state.status != Status.RUNNING:
            return Result(Outcome.DUPLICATE, "the node has moved on; nothing changed")
        self._end_deadline(key, state)
        self._fail(key, state, reason)
        return Result(Outcome.APPLIED, f"{key} failed: {reason}")

    def fire_timer(self, key: str, attempt: int, kind: str) -> Result:
        """A timer came due: a deadline passed, or an automatic retry is to start. A timer
        whose attempt has moved on (answered in time, cancelled, retried) changes nothing."""
        state = self.run.nodes.get(key)
        if state is None or state.attempt != attempt or state.path is None:
            return Result(Outcome.DUPLICATE, f"{key} has moved on from attempt {attempt}; nothing changed")
        if kind == "timeout" and state.status == Status.RUNNING:
            limit = self._deadline(state.node_id)
            within = f"within {limit:g} s" if limit else "before its deadline"
            self._fail(key, state, f"timeout: no callback {within} (attempt {attempt})")
            return Result(Outcome.APPLIED, f"{key} timed out")
        if kind == "retry" and state.status == Status.RETRYING:
            self._fire(state.node_id, state.fan_path, key, state, state.input, automatic=True)
            return Result(Outcome.APPLIED, f"{key} retried automatically (attempt {state.attempt})")
        return Result(Outcome.DUPLICATE, f"{key} is {state.status}; nothing changed")

    def cancel(self) -> Result:
        """Every node path not finished becomes cancelled; the engine drops the run's unsent
        webhooks and timers in the same transaction."""
        status = self.run_status()
        if status == "cancelled":
            return Result(Outcome.DUPLICATE, f"run {self.run.id} was already cancelled; nothing changed")
        if status not in ("running", "waiting_for_user"):
            return Result(
                Outcome.CONFLICT, f"run {self.run.id} is {status}; only running or waiting runs can be cancelled"
            )
        for key, state in list(self.run.nodes.items()):
            if state.status not in CANCELLABLE:
                continue
            if state.path is None:  # a fan-out template: no event of its own
                self._template(state, Status.CANCELLED)
            else:
                self._set(key, state, Status.CANCELLED, error=CANCELLED_ERROR)
        return Result(Outcome.APPLIED, f"run {self.run.id} cancelled")

    def cancelled(self) -> bool:
        return self.tally.statuses[Status.CANCELLED] > 0

    def _refused_cancelled(self) -> Result:
        return Result(Outcome.CONFLICT, f"run {self.run.id} is cancelled; start a new run instead")

    def run_status(self) -> str:
        seen = {status for status, count in self.tally.statuses.items() if count > 0}
        if Status.CANCELLED in seen:
            return "cancelled"
        if Status.RUNNING in seen or Status.RETRYING in seen:  # a retrying node is still under way
            return "running"
        for status in (Status.WAITING_FOR_USER, Status.FAILED):
            if status in seen:
                return str(status)
        return "completed"

    # -- failures, deadlines -------------------------------------------------------
    def _fail(self, key: str, state: NodeState, error: str, output: Any = None) -> None:
        """A Worker's attempt failed: retried later under its policy, or failed for good."""
        node_id = state.node_id
        policy = self.plan.retries.get(node_id)
        failures = state.attempt - (state.budget_from or 1) + 1
        if policy is not None and failures < policy.max_attempts:
            self._set(key, state, Status.RETRYING, output=output, error=error)
            self.timers.append(Timer(key, state.attempt, "retry", self.at + policy.delay(failures)))
            return
        self._set(key, state, Status.FAILED, output=output, error=error)
        self._failed(node_id, state.fan_path)

    def _deadline(self, node_id: str) -> float | None:
        return self.plan.timeouts.get(node_id, self.node_timeout)

    def _end_deadline(self, key: str, state: NodeState) -> None:
        if self._deadline(state.node_id):
            self.timers_done.append((key, state.attempt, "timeout"))

    # -- edge walking ------------------------------------------------------------
    def _walk(self, node_id: str, path: tuple[int, ...]) -> None:
        plan = self.plan
        if plan.kind(node_id) is NodeType.SPLITTER:
            fanout = self.run.nodes[instance_key(node_id, path)].fanout or 0
            for target in plan.downstream[node_id]:
                if plan.closes.get(target) != node_id:
                    for i in range(fanout):
                        self._try_fire(target, (*path, i))
            if not fanout:
                self._close_templates(node_id)
            for collector in plan.collectors_of(node_id):  # with an empty array they fire now, with []
                self._try_fire(collector, path)
            return
        for target in plan.downstream[node_id]:
            self._try_fire(target, path[: len(plan.scope[target])])

    def _close_templates(self, splitter: str) -> None:
        """A Splitter opened no paths: the templates of its nodes read completed, not pending
        forever (paths opened elsewhere, in a nested fan-out, still decide their summary)."""
        for node_id, scope in self.plan.scope.items():
            template = self.run.nodes.get(node_id) if splitter in scope else None
            if template is not None and template.path is None and template.status == Status.PENDING:
                self._template(template, Status.COMPLETED)

    def _template(self, template: NodeState, status: Status) -> None:
        self.tally.statuses[template.status] -= 1
        self.tally.statuses[status.value] += 1
        template.status, template.updated_at = status.value, self.now

    def _failed(self, node_id: str, path: tuple[int, ...]) -> None:
        for collector in self.plan.collectors_over(node_id):
            self._try_fire(collector, path[: len(self.plan.scope[collector])])

    def _try_fire(self, node_id: str, path: tuple[int, ...]) -> None:
        key = instance_key(node_id, path)
        if node_id in self.plan.closes and self._gathering(key):
            return  # still waiting for its paths: its own state is not even read
        state = self.run.nodes.get(key)
        if state is not None and state.status != Status.PENDING:
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
            return self.run.input
        parts = []
        for source in upstream:
            if self.plan.kind(source) is NodeType.SPLITTER:  # a path reads its element of the array
                split = self.run.nodes.get(instance_key(source, path[:-1]))
                if split is None or split.status != Status.COMPLETED:
                    return _WAIT
                parts.append((source, split.output[path[-1]]))
                continue
            done = self.run.nodes.get(instance_key(source, path))
            if done is None or done.status != Status.COMPLETED:
                return _WAIT
            parts.append((source, done.output))
        return merge(parts)

    def _try_collect(self, node_id: str, path: tuple[int, ...], key: str, state: NodeState | None) -> None:
        done, failed, need = self.tally.gather.get(key, (0, 0, -1))
        if need < 0:  # its Splitter has not completed
            return
        if failed:
            members, depth = self.plan.inside[node_id], len(path)
            other_key, other = next(
                (k, s)
                for k, s in self.run.nodes.items()
                if s.status == Status.FAILED
                and s.node_id in members
                and s.path is not None
                and tuple(s.path[:depth]) == path
            )
            failing = self._begin(key, state or self._new(node_id, path), None)
            self._set(key, failing, Status.FAILED, error=f"path {other_key} failed: {other.error}")
            return
        if done < need:
            return
        self.run.nodes.load()  # every path's output at once, not one read per path
        split = self.run.nodes[instance_key(self.plan.closes[node_id], path)]
        gathered = []
        for i in range(split.fanout or 0):
            value = self._input(node_id, (*path, i))
            if value is _WAIT:
                return
            gathered.append(value)
        fresh = self._begin(key, state or self._new(node_id, path), None)
        self._set(key, fresh, Status.COMPLETED, output=gathered)
        self._walk(node_id, path)

    def _gathering(self, key: str) -> bool:
        """Whether a Collector's counts say it waits for more (neither ready nor failing)."""
        counts = self.tally.gather.get(key)
        return counts is not None and not counts[1] and (counts[2] < 0 or counts[0] < counts[2])

    def _begin(self, key: str, state: NodeState, value: Any) -> NodeState:
        """A new attempt of a node path: numbered, and a new row in the history."""
        state.attempt += 1
        self.attempts[(key, state.attempt)] = AttemptChange(key, state.attempt, new=True, input=value)
        return state

    def _fire(
        self,
        node_id: str,
        path: tuple[int, ...],
        key: str,
        state: NodeState | None,
        value: Any,
        *,
        automatic: bool = False,
    ) -> None:
        node = self.plan.nodes[node_id]
        fresh = self._begin(key, state or self._new(node_id, path), value)
        fresh.input = value
        if not automatic and node_id in self.plan.retries:
            fresh.budget_from = fresh.attempt
        if node.type is NodeType.WORKER:
            self._set(key, fresh, Status.RUNNING)
            url = self.callback_url(self.run.id, key, fresh.attempt)
            payload = {"runId": self.run.id, "nodeId": key, "config": node.data, "input": value, "callbackUrl": url}
            self.dispatches.append(Dispatch(key, fresh.attempt, node.data["webhookUrl"], payload))
            deadline = self._deadline(node_id)
            if deadline:
                self.timers.append(Timer(key, fresh.attempt, "timeout", self.at + deadline))
        elif node.type is NodeType.UX:
            self._set(key, fresh, Status.WAITING_FOR_USER)
        elif node.type is NodeType.SPLITTER:
            items, problem = extract_array(value, node.data.get("arrayPath"))
            if problem:
                self._set(key, fresh, Status.FAILED, error=f"Splitter {node_id!r}: {problem}")
                self._failed(node_id, path)
                return
            fresh.fanout = len(items)
            self._set(key, fresh, Status.COMPLETED, output=items)
            self._walk(node_id, path)

    def _new(self, node_id: str, path: tuple[int, ...]) -> NodeState:
        return NodeState(node_id, list(path))

    def _set(self, key: str, state: NodeState, status: Status, *, output: Any = None, error: str | None = None) -> None:
        before = None if key not in self.run.nodes else state.status
        state.status, state.output, state.error, state.updated_at = status.value, output, error, self.now
        self.run.nodes[key] = state
        self._count(key, state, before)
        attempt = state.attempt
        self.events.append(
            Event(
                key,
                status.value,
                attempt,
                error[:EVENT_ERROR_CHARS] if error else None,
                summary(output) if status is Status.COMPLETED else None,
            )
        )
        if status is Status.PENDING or not attempt:
            return
        change = self.attempts.get((key, attempt))
        if change is None:
            if before not in OPEN:
                return  # that attempt had ended already (a retrying or pending node being cancelled)
            change = self.attempts[(key, attempt)] = AttemptChange(key, attempt, new=False)
        change.status = Status.FAILED.value if status is Status.RETRYING else status.value
        change.output, change.error, change.finished = output, error, status not in OPEN

    def _count(self, key: str, state: NodeState, before: str | None) -> None:
        """The tally after ``state`` went from ``before`` (None: a new state) to its status."""
        after, tally = state.status, self.tally
        if before is not None:
            tally.statuses[before] -= 1
        tally.statuses[after] += 1
        if before != after and state.path is not None:
            _count_path(self.plan, tally, state, before, after)
        if after == Status.COMPLETED and state.node_id in self.plan.closes:
            tally.gather.pop(key, None)  # done with: nothing counts towards it any more


_WAIT = object()


def _count_path(plan: Plan, tally: Tally, state: NodeState, before: str | None, after: str) -> None:
    """What a node path's change of status does to the counts of the Collectors it concerns."""
    path, node_id = state.fan_path, state.node_id
    if node_id not in plan.nodes:  # a state of another graph's node: nothing counts on it
        return
    for was, step in ((before, -1), (after, 1)):
        if was == Status.COMPLETED:
            for collector in plan.gathers.get(node_id, ()):
                tally.counts(instance_key(collector, path[: len(plan.scope[collector])]))[0] += step
            if step > 0 and plan.kind(node_id) is NodeType.SPLITTER:
                for collector in plan.collectors_of(node_id):
                    tally.counts(instance_key(collector, path))[2] = (state.fanout or 0) * plan.inputs(collector)
        elif was == Status.FAILED:
            for collector in plan.collectors_over(node_id):
                tally.counts(instance_key(collector, path[: len(plan.scope[collector])]))[1] += step


def recount(plan: Plan, states: Mapping[str, NodeState]) -> Tally:
    """The tally of these states, counted from all of them (a run stored before tallies)."""
    tally = Tally()
    for state in states.values():
        tally.statuses[state.status] += 1
        if state.path is not None:
            _count_path(plan, tally, state, None, state.status)
    for key, state in states.items():
        if state.status == Status.COMPLETED and state.node_id in plan.closes:
            tally.gather.pop(key, None)
    return tally


def summary(output: Any) -> str | None:
    """A bounded excerpt of the output's JSON, for event rows."""
    if output is None:
        return None
    text = (
        output
        if isinstance(output, str)
        else json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)
    )
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 3] + "..."


def template_summary(states: Mapping[str, NodeState], node_id: str) -> dict[str, Any]:
    """How a node on fan-out paths stands, from its paths (``sq_0``, ``sq_1``, ... of ``sq``):
    the worst of their statuses and a count per status. With no paths it is pending until
    its Splitter opened none (completed) or the run was cancelled."""
    counts = Counter(s.status for s in states.values() if s.node_id == node_id and s.path is not None)
    if not counts:
        template = states.get(node_id)
        own = Status.PENDING.value if template is None else template.status
        return {"status": own if own in (Status.COMPLETED, Status.CANCELLED) else Status.PENDING.value, "paths": {}}
    worst = next((s.value for s in TEMPLATE_ORDER if s.value in counts), Status.PENDING.value)
    return {"status": worst, "paths": dict(counts)}


def initial_states(plan: Plan) -> dict[str, NodeState]:
    """Every node pending. Nodes on fan-out paths get one entry per path when they fire; their
    plain entry stays a pending template (``path`` None)."""
    return {node_id: NodeState(node_id, [] if not plan.scope[node_id] else None) for node_id in plan.nodes}
