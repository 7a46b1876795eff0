"""The flowise pack's learning tools: save a finished design, find and reuse an earlier one, rate it.

An agent asks ``flowise_find_design(request)`` before a full spec-driven design cycle; a match
comes back in a few hundred tokens (nodes, connections, key settings, checked against today's
catalog); ``flowise_reuse_design`` then creates the chatflow from it, or records why the user
said no. How ratings rank designs is in ``learning.py``'s docstring. Deleting stored data is
left to people (``agentloom flowise data ...``); agents get read-only statistics.
"""

from __future__ import annotations

import json
import time
from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.learning import ARTIFACTS
from agentloom.packs.flowise.replies import Rated
from agentloom.packs.flowise.tools import Flowise, log_session, pack, run_call

Bundle = str | dict[str, Any] | list[Any]


class Saved(TypedDict):
    artifact_id: str


class Offer(TypedDict):
    artifact_id: str
    similarity: float
    nodes: list[str]
    connections: list[list[str]]
    config: NotRequired[dict[str, Any]]
    rating: NotRequired[int]
    missing: NotRequired[list[str]]
    deprecated: NotRequired[list[str]]
    created: str


class Found(TypedDict):
    designs: list[Offer]
    message: NotRequired[str]


def _own_keys_listed(schema: dict[str, Any]) -> None:
    """tools/list says each thing once: an approved design's reply is flowise_build_flow's, whose output
    schema lists it; this one lists only its own keys (a reply is still checked against every key)."""
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k in ("notes", "recorded", "next")}
    schema["description"] = "approve=true: flowise_build_flow's reply, with notes"


@with_config(ConfigDict(json_schema_extra=_own_keys_listed))
class Reused(TypedDict):
    chatflow_id: NotRequired[str]
    name: NotRequired[str]
    attached: NotRequired[list[str]]
    credentials: NotRequired[list[str]]
    fill: NotRequired[list[str]]
    issues: NotRequired[list[str]]
    notes: NotRequired[list[str]]
    warning: NotRequired[str]
    recorded: NotRequired[bool]
    next: NotRequired[str]


@pack.tool()
async def flowise_save_artifact(
    state: Flowise,
    request: str,
    spec: Bundle,
    plan: Bundle,
    tasks: Bundle,
    design: dict[str, Any],
    chatflow_id: str | None = None,
    success: bool = True,
    reason: str | None = None,
) -> Saved:
    """Store a finished design for flowise_find_design: {nodes, connections: [[from, to]], config:
    {node: {input: value}}}; success=false (with `reason`) keeps a failure."""
    from agentloom.packs.flowise.learning import check_design

    compact = check_design(design)

    def save() -> Saved:
        catalog = state.catalog.state().nodes
        bundle = {"spec": spec, "plan": plan, "tasks": tasks}
        return {"artifact_id": state.learning.save(request, bundle, compact, chatflow_id, success, reason, catalog)}

    return await run_call(save)


@pack.tool(read_only=True)
async def flowise_find_design(state: Flowise, request: str) -> Found:
    """Before designing: earlier designs of similar requests (> 0.70); then flowise_reuse_design."""

    def find() -> Found:
        catalog = state.catalog.state()
        # No catalog yet (Flowise never reached): offer the designs unchecked rather than all "missing".
        designs = state.learning.find(request, catalog.nodes if catalog.refreshed_at is not None else None)
        reply: Found = {"designs": designs}  # type: ignore[typeddict-item]  # LearningStore.find answers plain dicts with the offer's keys
        if not designs:
            reply["message"] = "no earlier design above 0.70 similarity: go on with a full design."
        return reply

    return await run_call(find)


@pack.tool()
async def flowise_reuse_design(state: Flowise, artifact_id: str, approve: bool, reason: str | None = None) -> Reused:
    """approve=true: build the stored design; false: record the user's `reason`."""

    def reuse() -> Reused:
        started = time.perf_counter()
        learning = state.learning
        request, metadata = learning.get(artifact_id)
        if metadata["collection"] != ARTIFACTS:
            raise AgentloomError(f"artifact {artifact_id} is a failed design and cannot be reused; do a full design.")
        if not approve:
            if not (reason and reason.strip()):
                raise AgentloomError("reason is required when approve is false: say why the design does not fit.")
            learning.update(
                artifact_id,
                {"rejections": int(metadata.get("rejections") or 0) + 1, "last_rejection": reason},
                ARTIFACTS,
            )
            reply: Reused = {"recorded": True, "next": "do a full design, then flowise_save_artifact."}
            log_session(state, request, "rejected", reply, started, None, artifact_id)
            return reply
        design = json.loads(metadata["bundle"])["design"]
        built = state.builder.design(design, _name(request))
        log_session(state, request, "reused", built, started, built["chatflow_id"], artifact_id)
        return built  # type: ignore[return-value]  # Builder answers a plain dict with the reply's keys

    return await run_call(reuse)


@pack.tool(idempotent=True)
async def flowise_rate(state: Flowise, artifact_id: str, stars: int) -> Rated:
    """Rate a stored design 1-5 stars (4-5 are offered first)."""
    return await run_call(state.learning.rate, artifact_id, stars)


def _name(request: str) -> str:
    words = request.split()
    text = " ".join(words[:8])
    return text if len(words) <= 8 else text + " ..."
