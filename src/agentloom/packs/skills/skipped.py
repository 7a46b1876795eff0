"""Skill folders a scan could not index, kept beside the store so every process can name them.

A SKILL.md whose frontmatter does not parse (an unquoted ``: `` in a description, most often) is
left out of the index. Searches would then silently miss it, so the last scans' list is written to
``<folder>/skills.skipped.json`` and shown by ``skills_search`` and ``health``: the file, what is
wrong (with the line) and the fix. A scan replaces the entries under the roots it scanned.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from agentloom.core.errors import AgentloomError
from agentloom.packs.skills.replies import Skipped

log = logging.getLogger("agentloom.packs.skills")

FILE = "skills.skipped.json"
SHOWN = 5  # entries named in a search's message; the reply's ``skipped`` holds every one


def skipped_path(store: Path) -> Path:
    return store.parent / FILE


def _under(path: str, roots: list[Path]) -> bool:
    file = Path(path)
    return any(file == root or root in file.parents for root in roots)


def record(store: Path, found: list[Skipped], roots: list[Path]) -> None:
    """Keep what earlier scans found outside ``roots``, replace the rest with ``found``."""
    from agentloom.embeddings.cachefile import written_atomically

    roots = [root.expanduser().resolve() for root in roots]
    kept = [entry for entry in load(store) if not _under(str(Path(entry["path"]).resolve()), roots)]
    entries = sorted(kept + list(found), key=lambda entry: entry["path"])
    path = skipped_path(store)
    if not entries and not path.exists():
        return
    try:
        with written_atomically(path, "the list of skipped skills") as tmp:
            tmp.write_text(json.dumps(entries, ensure_ascii=False, indent=1), encoding="utf-8")
    except (OSError, AgentloomError) as exc:
        log.warning("skills: cannot write %s (%s); skipped skills are named only in this scan's reply", path, exc)


def load(store: Path) -> list[Skipped]:
    """The skipped skills of the last scans, or [] (none, or the file cannot be read)."""
    try:
        data = json.loads(skipped_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [
        Skipped(path=str(entry["path"]), reason=str(entry["reason"]))
        for entry in data
        if isinstance(entry, dict) and "path" in entry and "reason" in entry
    ]


def summary(entries: list[Skipped]) -> str:
    """One sentence naming them, for a search's message and for health."""
    named = "; ".join(f"{entry['path']}: {entry['reason']}" for entry in entries[:SHOWN])
    more = f"; and {len(entries) - SHOWN} more (see skipped)" if len(entries) > SHOWN else ""
    return (
        f"{len(entries)} skill(s) are not indexed, so no search finds them, because their SKILL.md does not "
        f"parse: {named}{more}. Fix the file, then run skills_index"
    )
