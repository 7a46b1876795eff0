"""Typed shapes of Stitch: the React Flow graph, node states, runs, and the worker protocol."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloom.core.timestamps import Timestamp


class NodeType(StrEnum):
    WORKER = "Worker"
    UX = "UX"
    SPLITTER = "Splitter"
    COLLECTOR = "Collector"


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    WAITING_FOR_USER = "waiting_for_user"
    RETRYING = "retrying"  # failed; an automatic retry (data.retry) is scheduled
    CANCELLED = "cancelled"


class Position(BaseModel):
    x: float = 0
    y: float = 0


class StitchNode(BaseModel):
    """A React Flow node. Unknown React Flow keys (width, selected, ...) are kept."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1, max_length=200)
    type: NodeType
    position: Position = Field(default_factory=Position)
    data: dict[str, Any] = Field(default_factory=dict)  # NodeConfig: webhookUrl, arrayPath, ...


class StitchEdge(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    id: str = Field(min_length=1)
    source: str
    target: str
    sourceHandle: str | None = None  # noqa: N815 - React Flow's names
    targetHandle: str | None = None  # noqa: N815


class Graph(BaseModel):
    model_config = ConfigDict(extra="allow")
    nodes: list[StitchNode]
    edges: list[StitchEdge] = Field(default_factory=list)


class NodeState(BaseModel):
    """One entry of ``node_states``. ``node_id`` and ``path`` say which node and which fan-out
    path it is, so nothing ever has to be read back out of the key."""

    status: Status
    output: Any = None
    error: str | None = None
    node_id: str
    path: list[int] = Field(default_factory=list)
    attempt: int = 0
    input: Any = None
    fanout: int | None = None  # a completed Splitter: how many paths it opened
    updated_at: Timestamp | None = None  # stored as text in the one format (older runs: any ISO 8601)


class StitchFlow(BaseModel):
    id: str
    name: str
    graph: Graph
    created_at: Timestamp
    updated_at: Timestamp


RunStatus = Literal["running", "waiting_for_user", "completed", "failed", "cancelled"]


class StitchRun(BaseModel):
    id: str
    flow_id: str
    status: RunStatus
    input: Any = None
    node_states: dict[str, NodeState]
    created_at: Timestamp
    updated_at: Timestamp


class WorkerPayload(BaseModel):
    """What a Worker's webhook receives."""

    runId: str  # noqa: N815 - the wire names of the protocol
    nodeId: str  # noqa: N815
    config: dict[str, Any]
    input: Any
    callbackUrl: str  # noqa: N815


class Callback(BaseModel):
    """What a worker posts back to its callback URL."""

    status: Literal["completed", "failed"]
    output: Any = None
    error: str | None = None
