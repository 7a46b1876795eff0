"""What a docset name and a keyword list may be: one rule for the tools, the CLI and the config."""

from __future__ import annotations

import re

from agentloom.core.errors import AgentloomError

NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}")
NAME_RULE = "use 1 to 100 letters, digits, '.', '_' or '-' (no '/', '\\', spaces or '..')"
MAX_KEYWORDS = 32
MAX_KEYWORD_LENGTH = 200


class InvalidInput(AgentloomError):
    """An argument is malformed; nothing was read or written."""


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a docset, or None when it can."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if not NAME_PATTERN.fullmatch(name) or ".." in name or name == ".":
        return f"{name!r} is not a valid docset name: {NAME_RULE}"
    return None


def check_name(name: str, field: str = "docset") -> str:
    problem = name_problem(name)
    if problem:
        raise InvalidInput(f"{field}: {problem}")
    return name


def check_keywords(values: list[str], field: str, *, required: bool) -> list[str]:
    """Strip each keyword; refuse empty lists (when required), blank items and oversize input."""
    example = '["useEffect", "cleanup"]' if field == "keywords" else '["hooks", "lifecycle"]'
    if required and not values:
        raise InvalidInput(f"{field}: give at least one keyword, for example {example}")
    if len(values) > MAX_KEYWORDS:
        raise InvalidInput(
            f"{field}: {len(values)} keywords is too many; give at most {MAX_KEYWORDS}, the most specific first"
        )
    cleaned = []
    for i, value in enumerate(values):
        text = value.strip()
        if not text:
            raise InvalidInput(f"{field}[{i}]: is blank; remove it or give a word to search for")
        if len(text) > MAX_KEYWORD_LENGTH:
            raise InvalidInput(
                f"{field}[{i}]: is {len(text)} characters long; keep each keyword under {MAX_KEYWORD_LENGTH + 1}"
            )
        cleaned.append(text)
    return cleaned
