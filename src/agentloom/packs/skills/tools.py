"""The MCP tools of the skills pack."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from agentloom.core.health import Check
from agentloom.core.work import current_step
from agentloom.packs.skills import skipped
from agentloom.packs.skills.replies import IndexResult, Removed, SearchResult, SkillDetail, SkillList
from agentloom.packs.skills.store import SkillIndex
from agentloom.server.packs import Pack, PackContext
from agentloom.server.work import run_work

log = logging.getLogger("agentloom.packs.skills")
P = ParamSpec("P")
T = TypeVar("T")

pack: Pack[SkillIndex] = Pack(
    "skills",
    "Find the right Agent Skill (SKILL.md) for a request, in English or Chinese, on LanceDB",
    requires=["lancedb"],
    install="'agentloom[skills]'",
    cli="agentloom.packs.skills.cli:app",
)


@pack.setup
def setup(ctx: PackContext) -> SkillIndex:
    """The skill index in the pack's folder, on the pack's settings and the shared embedding service; a server
    starts its background scan too."""
    from agentloom.packs.skills.settings import SkillSettings

    index = SkillIndex.open(ctx.data_dir, ctx.embeddings, ctx.config(SkillSettings))
    ctx.log.info("skills: LanceDB at %s, roots %s", index.path, ", ".join(map(str, index.roots)))
    if ctx.serving and index.settings.scan_on_start:
        index.start_background_scan(index.settings.scan_delay_seconds)  # never delays the first tools/list
    return index


@pack.health
def health(index: SkillIndex) -> list[Check]:
    try:
        status = index.status()
    except Exception as exc:
        return [Check(f"skills store ({index.path})", False, str(exc))]
    detail = f"{status['skills']} skills, model {status['model']}"
    if status["scanning"]:
        detail += ", indexing"
    checks = [Check(f"skills store ({index.path})", True, detail)]
    left_out = index.skipped()
    if left_out:
        checks.append(Check("skill files", False, skipped.summary(left_out), required=False))
    return checks


async def _run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    index = getattr(fn, "__self__", None)
    if isinstance(index, SkillIndex):
        index.wake()
    return await run_work(f"skills {fn.__name__}", lambda: fn(*args, **kwargs))


@pack.tool(read_only=True)
async def skills_search(index: SkillIndex, query: str, limit: int = 5, threshold: float | None = None) -> SearchResult:
    """Skills that fit a request (any language), best first; score 0-1 (0.5: starts to fit),
    `threshold` drops lower; `fallback`: keyword matching. Then skills_get(name)."""
    return await _run(index.search, query, limit, threshold)


@pack.tool(read_only=True)
async def skills_get(index: SkillIndex, name: str) -> SkillDetail:
    """A skill's SKILL.md body (its instructions) and the files of its folder."""
    return await _run(index.get, name)


@pack.tool(idempotent=True)
async def skills_index(index: SkillIndex, path: str | None = None) -> IndexResult:
    """(Re)index every skills root, or one folder; only changed skills are re-embedded."""
    result = await _run(index.scan, Path(path) if path else None, current_step)  # scan expands a leading ~
    return IndexResult(
        added=result["added"],
        updated=result["updated"],
        unchanged=result["unchanged"],
        removed=result["removed"],
        skipped=result["skipped"],
        total=result["total"],
        model=result["model"],
        seconds=result["seconds"],
    )


@pack.tool(read_only=True)
async def skills_list(index: SkillIndex) -> SkillList:
    """Every indexed skill, with its one-line description."""
    return await _run(index.list)


@pack.tool(destructive=True, idempotent=True)
async def skills_remove(index: SkillIndex, name: str) -> Removed:
    """Drop a skill from the index (its folder stays)."""
    return await _run(index.remove, name)
