"""The flowise pack's one data-management tool: read-only statistics of its ChromaDB.

An agent may see how much the pack has stored, to tell the user or suggest a cleanup; deleting is
left to the person at the terminal (``agentloom flowise data prune|prune-failed|sessions-clear|
reset``), so there is deliberately no delete tool.
"""

from __future__ import annotations

from agentloom.packs.flowise.replies import DataStats
from agentloom.packs.flowise.tools import Flowise, pack, run_call


@pack.tool(read_only=True)
async def flowise_data_stats(state: Flowise) -> DataStats:
    """What the pack stores, per collection (cleanup: `agentloom flowise data`)."""
    from agentloom.packs.flowise.data import stats

    def collect() -> DataStats:
        return {"collections": stats(state)}

    return await run_call(collect)
