"""Columns of a Chroma answer, typed as the packs read them.

Chroma answers ``get`` and ``query`` in columns (ids, documents, metadatas, ...) and types every
column but ids as optional: a column is None when the call did not ask for it with ``include``.
A pack always asks for what it reads, so :func:`column` turns a missing one into an error that
says so rather than a crash further on. Metadata values are typed as any value Chroma stores;
:func:`meta_str` reads one a pack itself wrote as a string (ids, paths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from agentloom.core.errors import AgentloomError

T = TypeVar("T")


def column(values: list[T] | None, name: str) -> list[T]:
    """A column the call asked for with ``include=[...]``."""
    if values is None:
        raise AgentloomError(f"Chroma answered without the {name} it was asked for; retry, or check the server.")
    return values


def meta_str(meta: Mapping[str, object], key: str) -> str:
    """A metadata value a pack wrote as a string (``document_id``, ``source_path``)."""
    return str(meta[key])
