"""Reading and validating ``SKILL.md`` (the Agent Skills format)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKILL_FILE = "SKILL.md"
MARKER = ".vectorized"
NAME = re.compile(r"^[a-z0-9-]{1,64}$")
MAX_DESCRIPTION = 1024


class SkillFormatError(ValueError):
    """A SKILL.md that breaks the format; the message names the rule."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    tags: list[str]
    path: Path  # the skill folder
    size: int
    hash: str
    body: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def file(self) -> Path:
        return self.path / SKILL_FILE

    def embedding_text(self) -> str:
        return embedding_text(self.name, self.description, self.tags)


def embedding_text(name: str, description: str, tags: list[str]) -> str:
    """The text every model embeds for a skill (the search's second model rebuilds it from a table row)."""
    text = f"{name.replace('-', ' ')}: {description}"
    if tags:
        text += f" ({', '.join(tags)})"
    return text


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _split(text: str) -> tuple[str, str]:
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError("no YAML frontmatter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise SkillFormatError("the frontmatter is not closed by a '---' line")


def _tags(meta: dict[str, Any]) -> list[str]:
    raw: Any = None
    metadata = meta.get("metadata")
    if isinstance(metadata, dict) and metadata.get("tags") is not None:
        raw = metadata["tags"]
    elif meta.get("tags") is not None:
        raw = meta["tags"]
    if raw is None:
        return []
    if isinstance(raw, str):
        items = raw.split(",")
    elif isinstance(raw, list):
        items = [str(v) for v in raw]
    else:
        raise SkillFormatError("tags must be a comma-separated string or a list of strings")
    return [t.strip() for t in items if t.strip()]


def _yaml_problem(exc: Exception, front: str) -> str:
    """A YAML error as the line of SKILL.md it is on (the frontmatter starts on line 2), what is wrong and the fix."""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return f"the frontmatter is not valid YAML ({problem})"
    line = mark.line + 2
    lines = front.splitlines()
    text = lines[mark.line].strip() if mark.line < len(lines) else ""
    where = f"line {line} ({text[:80]!r})" if text else f"line {line}"
    if "mapping values are not allowed" in problem:
        key = text.split(":", 1)[0].strip() or "the value"
        return (
            f"the frontmatter is not valid YAML at {where}: a value holds ': ', which YAML reads as a new field. "
            f"Fix: put the value in quotes, e.g. {key}: \"...\", or replace ': ' with ' - '."
        )
    return (
        f"the frontmatter is not valid YAML at {where}: {problem}. Fix: correct that line (quote values with : or #)."
    )


def parse_skill(folder: Path, data: bytes | None = None, digest: str | None = None) -> Skill:
    """Read ``folder/SKILL.md`` (or take its bytes, already read, and their digest); raise SkillFormatError (the
    broken rule) or OSError."""
    import yaml

    if data is None:
        data = (folder / SKILL_FILE).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError("the file is not UTF-8 text") from None
    front, body = _split(text)
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError as exc:
        raise SkillFormatError(_yaml_problem(exc, front)) from None
    if not isinstance(meta, dict):
        raise SkillFormatError("the frontmatter must be a YAML mapping of fields")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SkillFormatError("'name' is required (1-64 lowercase letters, digits, hyphens)")
    if not NAME.match(name):
        raise SkillFormatError(f"'name' {name!r} must be 1-64 lowercase letters, digits or hyphens")
    if name != folder.name:
        raise SkillFormatError(f"'name' {name!r} must equal the folder name {folder.name!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("'description' is required (1-1024 characters)")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        raise SkillFormatError(f"'description' has {len(description)} characters; at most {MAX_DESCRIPTION}")
    metadata = meta.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise SkillFormatError("'metadata' must be a map of strings")
    for key in ("license", "compatibility"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise SkillFormatError(f"'{key}' must be a string")
    tools = meta.get("allowed-tools")
    if tools is not None and not isinstance(tools, (str, list)):
        raise SkillFormatError("'allowed-tools' must be a string or a list")
    extra = {k: meta[k] for k in ("license", "compatibility", "allowed-tools") if meta.get(k) is not None}
    return Skill(
        name=name,
        description=description,
        tags=_tags(meta),
        path=folder,
        size=len(data),
        hash=digest or file_digest(data),  # the scan has hashed the bytes already
        body=body.strip("\n"),
        extra=extra,
    )
