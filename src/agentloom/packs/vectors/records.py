"""What the vectors pack stores, and the checks at its edge: collection names, user metadata,
the chunk and manifest ids, and the records a write commits (see store.py for how)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloom.core.errors import AgentloomError
from agentloom.core.timestamps import iso

if TYPE_CHECKING:
    from agentloom.packs.vectors.chunking import Chunk

MANIFEST = "agentloom-documents"
SYSTEM_FIELDS = frozenset(
    {
        "document_id",
        "chunk_index",
        "start",
        "end",
        "tokens",
        "created_at",
        "updated_at",
        "embedding_model",
        "generation",
    }
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]$")


def public_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk's metadata as replies show it: no internal generation (a 19-digit integer that
    JavaScript clients cannot hold exactly), timestamps as ISO dates (what filters accept)."""
    shown = {k: v for k, v in meta.items() if k != "generation"}
    for key in ("created_at", "updated_at"):
        if isinstance(shown.get(key), (int, float)):
            shown[key] = iso(shown[key])
    return shown


def check_collection_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise AgentloomError(
            f"collection name {name!r} is invalid: use 3-63 characters from letters, digits, '.', '_' and '-', "
            "starting and ending with a letter or digit (e.g. 'project-notes')."
        )
    if name == MANIFEST:
        raise AgentloomError(f"collection name {name!r} is reserved by agentloom; choose another name.")
    return name


def check_metadata(metadata: Mapping[str, Any] | None, field: str = "metadata") -> dict[str, Any]:
    clean: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not key or key.startswith(("$", "#")):
            raise AgentloomError(
                f"{field} key {key!r} is invalid: keys are non-empty strings not starting with '$' or '#' "
                "(Chroma reserves those)."
            )
        if key in SYSTEM_FIELDS:
            raise AgentloomError(
                f"{field}[{key!r}] is set by agentloom ({', '.join(sorted(SYSTEM_FIELDS))}); rename your key."
            )
        if not isinstance(value, (str, int, float, bool)) or value is None:
            raise AgentloomError(
                f"{field}[{key!r}] must be a string, number or boolean, got {type(value).__name__}; "
                "flatten nested values or store them as a JSON string."
            )
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise AgentloomError(
                f"{field}[{key!r}] = {value} does not fit in a 64-bit integer (Chroma's limit); store it as a string."
            )
        clean[key] = value
    return clean


@dataclass(frozen=True)
class NewDocument:
    """A checked document, not yet chunked, embedded or written: its chunks come a section at a
    time (``sections``), so a large text never has all of its chunks, or vectors, in memory."""

    document_id: str
    metadata: dict[str, Any]
    text: str
    split: Callable[[str], Iterator[list[Chunk]]]  # the chunker, set for the model and chunk sizes
    warning: str | None = None  # e.g. chunk_size capped at what the model reads

    def sections(self) -> Iterator[list[Chunk]]:
        return self.split(self.text)

    @property
    def chunks(self) -> list[Chunk]:
        return [chunk for section in self.sections() for chunk in section]


@dataclass(frozen=True)
class DocumentRecord:
    collection: str
    document_id: str
    generation: int
    chunk_count: int
    created_at: float
    updated_at: float
    embedding_model: str
    metadata: dict[str, Any]


def chunk_id(document_id: str, generation: int, index: int) -> str:
    return f"{document_id}:{generation}:{index}"


def manifest_id(collection: str, document_id: str) -> str:
    return json.dumps([collection, document_id])  # unambiguous whatever the characters


def record_of(meta: Mapping[str, Any]) -> DocumentRecord:
    return DocumentRecord(
        collection=meta["collection"],
        document_id=meta["document_id"],
        generation=int(meta["generation"]),
        chunk_count=int(meta["chunk_count"]),
        created_at=float(meta["created_at"]),
        updated_at=float(meta["updated_at"]),
        embedding_model=meta["embedding_model"],
        metadata=json.loads(meta.get("metadata_json") or "{}"),
    )
