"""``.agentic-metadata.json``: what each source of a docset last brought, and when.

A file that cannot be read as this shape is backed up beside itself and rebuilt: metadata
describes the folder, so losing it costs one full refresh, never the docs.

The file sits in a folder anyone may have committed to a repository, so it is not trusted:
every file name in it must be a plain relative path that stays inside the docset folder, or
it is dropped and reported (``Metadata.problems``); a metadata file that is a symbolic link
is never read. ``hashes`` records what was written to each file, so a later refresh deletes
a file only while it still holds exactly that.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from agentloom.packs.docs.content.safefs import path_problem

log = logging.getLogger("agentloom.packs.docs.content")
METADATA_NAME = ".agentic-metadata.json"


class SourceEntry(BaseModel):
    url: str
    branch: str | None = None
    paths: list[str] | None = None
    last_fetched: str | None = None  # of the last successful fetch: core.timestamps.iso (older files: ISO 8601)
    last_attempt: str | None = None
    content_hash: str | None = None
    files: list[str] = Field(default_factory=list)
    hashes: dict[str, str] = Field(default_factory=dict)  # file -> sha256 of what was written to it
    commit: str | None = None
    error: str | None = None


class Metadata(BaseModel):
    version: int = 1
    docset: str
    updated_at: str | None = None
    sources: list[SourceEntry] = Field(default_factory=list)
    _problems: list[str] = PrivateAttr(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """What was refused while reading the file (never written back)."""
        return self._problems

    def entry(self, url: str) -> SourceEntry | None:
        return next((s for s in self.sources if s.url == url), None)


def read(folder: Path, docset: str) -> Metadata:
    path = folder / METADATA_NAME
    if path.is_symlink():
        backup = _set_aside(path, "link")
        fresh = Metadata(docset=docset)
        fresh.problems.append(
            f"{path} was a symbolic link (to {os.readlink(backup)}), which is never followed; moved it aside as "
            f"{backup.name} and started afresh"
        )
        return fresh
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Metadata(docset=docset)
    except UnicodeDecodeError:
        text = ""  # not text: as corrupt as invalid JSON
    try:
        metadata = Metadata.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        backup = _set_aside(path, "corrupt")
        log.warning(
            "%s was not valid metadata (%s); kept it as %s and started afresh", path, str(exc)[:200], backup.name
        )
        return Metadata(docset=docset)
    _drop_outside_paths(folder, metadata)
    return metadata


def _drop_outside_paths(folder: Path, metadata: Metadata) -> None:
    """Keep only file names that resolve inside ``folder``; report the others."""
    root = os.path.realpath(folder)
    for entry in metadata.sources:
        kept = []
        for name in entry.files:
            problem = path_problem(name)
            if problem is None:
                resolved = os.path.realpath(os.path.join(root, name))
                if os.path.commonpath([root, resolved]) != root or resolved == root:
                    problem = f"leads outside the docset folder (to {resolved})"
            if problem is None and name == METADATA_NAME:
                problem = "is the metadata file itself"
            if problem is None:
                kept.append(name)
            else:
                metadata.problems.append(
                    f"{folder / METADATA_NAME}: refused the entry {name!r} of {entry.url}: it {problem}. Nothing "
                    "outside the docset folder is ever written or deleted; if you did not put it there, someone "
                    "edited this file (it may have come with a cloned repository)"
                )
        entry.files = list(dict.fromkeys(kept))
        entry.hashes = {name: digest for name, digest in entry.hashes.items() if name in entry.files}


def _set_aside(path: Path, why: str) -> Path:
    backup = path.with_name(f"{METADATA_NAME}.{why}-{int(time.time())}")
    os.replace(path, backup)  # renames the entry itself; a link is not followed
    return backup


def write(folder: Path, metadata: Metadata) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = metadata.model_dump(mode="json")
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".agentic-metadata-", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2)
        out.write("\n")
    os.replace(temp, folder / METADATA_NAME)
