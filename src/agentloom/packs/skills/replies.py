"""What the skills tools answer: the index builds these, the tools return them as they are."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12


class SkillHit(TypedDict):
    name: str
    description: str
    score: float
    path: str


class Skipped(TypedDict):
    path: str
    reason: str


class SearchResult(TypedDict):
    results: list[SkillHit]
    message: str | None
    mode: Literal["hybrid", "vector", "keyword"]
    fallback: bool
    model: str | None
    threshold: float | None
    skipped: NotRequired[list[Skipped]]  # skill folders whose SKILL.md does not parse (skipped.py)


class SkillDetail(TypedDict):
    name: str
    description: str
    tags: list[str]
    path: str
    body: str
    files: list[str]
    metadata: NotRequired[dict[str, Any]]


class IndexResult(TypedDict):
    added: int
    updated: int
    unchanged: int
    removed: int
    skipped: list[Skipped]
    total: int
    model: str
    seconds: float


class SkillLine(TypedDict):
    name: str
    description: str


class SkillList(TypedDict):
    skills: list[SkillLine]
    count: int
    message: str | None


class Removed(TypedDict):
    name: str
    removed: bool
    path: str
