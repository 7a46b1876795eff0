"""Settings of the skills pack: ``[pack_settings.skills]`` or ``AGENTLOOM_SKILLS__<KEY>``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from agentloom.core.settings import folder_list

# The model skills use unless told otherwise: multilingual (Chinese requests, English skills).
DEFAULT_SKILLS_MODEL = "multilingual-e5-small"
# A second multilingual model mixed into every score: stronger on Chinese requests against English
# descriptions, weaker where a request's one deciding word is not aligned across languages.
DEFAULT_RANK_MODEL = "use-multilingual-v3"
# The seed's English model, mixed in too: the best of the three on English requests. Each model's
# share per request language is in ranking.json.
DEFAULT_ENGLISH_MODEL = "all-MiniLM-L6-v2"
# Scores run from 0 to 1 and are 0.5 where a skill starts to fit (search.py, background.py).
DEFAULT_THRESHOLD = 0.5
# Follow the registry's default embedding model instead (a default switch re-indexes).
FOLLOW_DEFAULT = "default"


class SkillSettings(BaseModel):
    roots: list[Path] | None = Field(
        None,
        description="Skill folders to scan (each holds <skill-name>/SKILL.md). Default: <data_dir>/skills "
        "plus, when they exist, ./.claude/skills and ./skills. A JSON list or paths separated by os.pathsep.",
    )
    embedding_model: str = Field(
        DEFAULT_SKILLS_MODEL,
        description="Registry key of the model for skills (registered on first use when it is one of the packaged "
        "models), or 'default' to follow the registry's default embedding model.",
    )
    threshold: float = Field(
        DEFAULT_THRESHOLD,
        ge=0,
        le=1,
        description="Default score cut-off for skills_search (scores run from 0 to 1, the same for every request "
        "and language; 0.5 is where a skill starts to fit).",
    )
    rank_model: str | None = Field(
        DEFAULT_RANK_MODEL,
        description="Registry key of a second model whose judgement is mixed into every score, or null/'' for "
        "the scoring model alone.",
    )
    rank_weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Share of the second model in every score, in place of the measured shares of ranking.json "
        "(0: ignore it). Default: those shares.",
    )
    english_model: str | None = Field(
        DEFAULT_ENGLISH_MODEL,
        description="Registry key of a third model mixed into the scores of English requests (and of Chinese "
        "ones through their glossary translation), or null/'' for none.",
    )
    scan_on_start: bool = Field(True, description="Scan the roots in the background when the server starts.")
    scan_delay_seconds: float = Field(
        3.0,
        ge=0,
        description="How long the start-up scan waits (unless a skills tool is called first), so the "
        "server answers its first requests before LanceDB is imported.",
    )
    compact: bool = Field(True, description="Compact the LanceDB table after a scan that changed it.")

    @field_validator("roots", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        return folder_list(value)


def default_roots(data_dir: Path, cwd: Path | None = None) -> list[Path]:
    """The pack's folder (<data_dir>/skills), plus the project's .claude/skills and skills/ when they exist."""
    cwd = cwd or Path.cwd()
    roots = [data_dir]
    for extra in (cwd / ".claude" / "skills", cwd / "skills"):
        if extra.is_dir():
            roots.append(extra)
    return roots
