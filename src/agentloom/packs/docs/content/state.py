"""``.agentic-metadata.json``: what each source of a docset last brought, and when (REQ-13).

A file that cannot be read as this shape is backed up beside itself and rebuilt: metadata
describes the folder, so losing it costs one full refresh, never the docs.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger("agentloom.packs.docs.content")
METADATA_NAME = ".agentic-metadata.json"


class SourceEntry(BaseModel):
    url: str
    branch: str | None = None
    paths: list[str] | None = None
    last_fetched: str | None = None  # ISO-8601 UTC of the last successful fetch
    last_attempt: str | None = None
    content_hash: str | None = None
    files: list[str] = Field(default_factory=list)
    commit: str | None = None
    error: str | None = None


class Metadata(BaseModel):
    version: int = 1
    docset: str
    updated_at: str | None = None
    sources: list[SourceEntry] = Field(default_factory=list)

    def entry(self, url: str) -> SourceEntry | None:
        return next((s for s in self.sources if s.url == url), None)


def read(folder: Path, docset: str) -> Metadata:
    path = folder / METADATA_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Metadata(docset=docset)
    try:
        return Metadata.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        backup = path.with_name(f"{METADATA_NAME}.corrupt-{int(time.time())}")
        os.replace(path, backup)
        log.warning("%s was not valid metadata (%s); kept it as %s and started afresh", path, str(exc)[:200], backup.name)
        return Metadata(docset=docset)


def write(folder: Path, metadata: Metadata) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = metadata.model_dump(mode="json")
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".agentic-metadata-", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2)
        out.write("\n")
    os.replace(temp, folder / METADATA_NAME)
