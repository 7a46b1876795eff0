"""A run's state as the engine holds it: the run, the latest state of each node path, and its tally.

Each state is stored as JSON (:meth:`NodeState.to_json`): in ``stitch_runs.node_states`` (node
key -> state) or, for the states that grow with a fan-out, one row each in ``stitch_paths``.
The JSON keeps the shape every earlier version wrote: ``fanout``, ``budget_from`` and
``updated_at`` appear only once set, and a key this version does not know is kept as it is,
so a run written by another version reads and writes back unchanged.

An event reads only the states it asks for (:class:`NodeStates` fetches the others on demand)
and answers what needs all of them from the run's :class:`Tally`, so its cost does not grow
with the number of paths in its run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloom.stitch.models import Status

_KNOWN = frozenset(
    {"status", "output", "error", "node_id", "path", "attempt", "input", "fanout", "budget_from", "updated_at"}
)


@dataclass(slots=True)
class NodeState:
    """One node path (``work``, or ``work_3`` on a fan-out path), or a fan-out template (``path`` None:
    the plain entry of a node on fan-out paths, which never fires itself)."""

    node_id: str
    path: list[int] | None
    status: str = Status.PENDING.value  # a Status value (text: a run stored by another version may say more)
    output: Any = None
    error: str | None = None
    attempt: int = 0  # the latest attempt's number; 0: never fired
    input: Any = None
    fanout: int | None = None  # a completed Splitter: how many paths it opened
    budget_from: int | None = None  # under a retry policy: the attempt its current budget started with
    updated_at: str | None = None  # text in the one timestamp format (older runs: any ISO 8601)
    extra: dict[str, Any] | None = None  # keys this version does not know, kept

    @property
    def fan_path(self) -> tuple[int, ...]:
        """Which fan-out path, as a tuple (``()`` outside any fan-out); a template has none."""
        if self.path is None:
            raise ValueError(f"{self.node_id!r} is a fan-out template, not a node path")
        return tuple(self.path)

    @classmethod
    def from_json(cls, key: str, data: Mapping[str, Any]) -> NodeState:
        return cls(
            data.get("node_id", key),
            data.get("path"),
            data.get("status", Status.PENDING.value),
            data.get("output"),
            data.get("error"),
            data.get("attempt", 0),
            data.get("input"),
            data.get("fanout"),
            data.get("budget_from"),
            data.get("updated_at"),
            None if data.keys() <= _KNOWN else {k: v for k, v in data.items() if k not in _KNOWN},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "node_id": self.node_id,
            "path": self.path,
            "attempt": self.attempt,
            "input": self.input,
        }
        if self.fanout is not None:
            out["fanout"] = self.fanout
        if self.budget_from is not None:
            out["budget_from"] = self.budget_from
        if self.updated_at is not None:
            out["updated_at"] = self.updated_at
        if self.extra:
            out.update(self.extra)
        return out


def node_states(data: Mapping[str, Any]) -> dict[str, NodeState]:
    """``node_states`` as stored (JSON) into typed states."""
    return {key: NodeState.from_json(key, value) for key, value in data.items()}


def node_states_json(states: Mapping[str, NodeState]) -> dict[str, dict[str, Any]]:
    return {key: state.to_json() for key, state in states.items()}


Fetch = Callable[[Sequence[str]], dict[str, NodeState]]  # these keys' states, those that exist
FetchAll = Callable[[], dict[str, NodeState]]


class NodeStates(Mapping[str, NodeState]):
    """A run's node states, read from the database as they are asked for.

    Starts with the states at hand; a key not among them is fetched (``fetch``) once, and
    iterating fetches every state (``fetch_all``). Without fetchers the states at hand are all
    there is. Setting a state records its key in :attr:`changed`, for the writer."""

    def __init__(self, states: dict[str, NodeState], fetch: Fetch | None = None, fetch_all: FetchAll | None = None):
        self._states = states
        self._fetch = fetch
        self._fetch_all = fetch_all
        self._absent: set[str] = set()
        self.complete = fetch_all is None
        self.changed: set[str] = set()

    def __getitem__(self, key: str) -> NodeState:
        state = self._states.get(key)
        if state is not None:
            return state
        if self.complete or key in self._absent or self._fetch is None:
            raise KeyError(key)
        state = self._fetch([key]).get(key)
        if state is None:
            self._absent.add(key)
            raise KeyError(key)
        self._states[key] = state
        return state

    def __setitem__(self, key: str, state: NodeState) -> None:
        self._states[key] = state
        self._absent.discard(key)
        self.changed.add(key)

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(self._states)

    def __len__(self) -> int:
        self.load()
        return len(self._states)

    def load(self) -> None:
        """Fetch every state not at hand (those at hand may hold changes: they are kept)."""
        if self.complete:
            return
        assert self._fetch_all is not None
        for key, state in self._fetch_all().items():
            self._states.setdefault(key, state)
        self.complete = True

    def at_hand(self) -> dict[str, NodeState]:
        """The states read or set so far, without fetching."""
        return self._states


@dataclass
class Tally:
    """What an event would otherwise count over all of its run's states.

    ``statuses``: how many node states (paths and templates) are in each status; the run's
    status follows from it. ``gather``: per Collector instance key, ``[done, failed, need]``:
    its inputs completed so far (one per upstream node per path), its member paths failed now,
    and how many inputs it needs (set when its Splitter completes; -1 before).
    """

    statuses: Counter[str] = field(default_factory=Counter)
    gather: dict[str, list[int]] = field(default_factory=dict)

    def counts(self, key: str) -> list[int]:
        return self.gather.setdefault(key, [0, 0, -1])

    def to_json(self) -> dict[str, Any]:
        return {"statuses": {s: n for s, n in self.statuses.items() if n}, "gather": self.gather}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tally:
        return cls(Counter(data.get("statuses") or {}), {k: list(v) for k, v in (data.get("gather") or {}).items()})


class RunState:
    """What an event needs of its run: its input (or ``read_input``, called the first time it is
    needed), its node states and (``None``: counted from the states when the event starts, as for
    a run stored before tallies) its tally."""

    __slots__ = ("id", "_input", "_read_input", "nodes", "tally")

    def __init__(
        self,
        id: str,
        input: Any,
        nodes: Mapping[str, NodeState],
        tally: Tally | None = None,
        read_input: Callable[[], Any] | None = None,
    ):
        self.id, self._input, self._read_input, self.tally = id, input, read_input, tally
        self.nodes = nodes if isinstance(nodes, NodeStates) else NodeStates(dict(nodes))

    @property
    def input(self) -> Any:
        if self._read_input is not None:
            self._input, self._read_input = self._read_input(), None
        return self._input
