"""The flowise pack's one data-management tool: read-only statistics of its ChromaDB.

An agent may see how much the pack has stored, to tell the user or suggest a cleanup; deleting is
left to the person at the terminal (``agentloom flowise data prune|prune-failed|sessions-clear|
reset``), so there is deliberately no delete tool.
"""

from __future__ import annotations

from typing_extensions import TypedDict

from agentloom.packs.flowise.tools import Flowise, pack, run_call


class CollectionStats(TypedDict):
    collection: str
    count: int
    bytes: int
    oldest: str | None
    newest: str | None


class DataStats(TypedDict):
    collections: list[CollectionStats]


@pack.tool(read_only=True)
async def flowise_data_stats(state: Flowise) -> DataStats:
    """What the pack stores, per collection (cleanup: `agentloom flowise data`)."""
    from agentloom.packs.flowise.data import stats

    def collect() -> DataStats:
        return {"collections": stats(state)}

    return await run_call(collect)
