"""A run's state as the engine holds it: the run, and the latest state of each node path.

Stored as JSON in ``stitch_runs`` (``node_states``: node key -> :meth:`NodeState.to_json`).
The JSON keeps the shape every earlier version wrote: ``fanout``, ``budget_from`` and
``updated_at`` appear only once set, and a key this version does not know is kept as it is,
so a run written by another version reads and writes back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(slots=True)
class RunState:
    """What an event needs of its run: its input and its node states."""

    id: str
    input: Any
    nodes: dict[str, NodeState]
