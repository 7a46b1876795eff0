"""Each flow version's plan (:func:`.graph.analyse`), made once per process and kept: a run keeps
the version it started with, and the plan (its gates' input schemas checked) is what the engine
runs and what the Waiting page shows. Derived from the database, never state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentloom.stitch.graph import Plan, analyse
from agentloom.stitch.models import Graph

_PLANS: dict[tuple[str, int], tuple[Plan, dict[str, Any]]] = {}
_KEPT = 512  # versions kept; past that the cache starts again


def planned(flow_id: str, version: int, graph: Callable[[], dict[str, Any]]) -> tuple[Plan, dict[str, Any]]:
    """The plan and the graph of a flow version; ``graph`` reads it, only when it is not kept."""
    kept = _PLANS.get((flow_id, version))
    if kept is None:
        read = graph()
        kept = analyse(Graph.model_validate(read)), read
        if len(_PLANS) > _KEPT:
            _PLANS.clear()
        _PLANS[(flow_id, version)] = kept
    return kept


def known(flow_id: str, version: int) -> bool:
    """Whether this process has planned the version (planning checks its input schemas)."""
    return (flow_id, version) in _PLANS


def forget() -> None:
    """Plan every version again when next asked, as a fresh process would."""
    _PLANS.clear()
