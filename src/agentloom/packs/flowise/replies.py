"""Tool answers the catalog, the learning store and the data module build whole; the tools return them
as they are."""

from __future__ import annotations

from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12


class Refreshed(TypedDict):
    new: int
    updated: int
    removed: int
    newly_deprecated: int
    templates_changed: int
    nodes: int
    deprecated: int
    templates: int
    refreshed_at: str | None
    server_version: str | None
    skipped_fresh: bool
    stale: bool
    message: str | None


class Rated(TypedDict):
    artifact_id: str
    rating: int


class CollectionStats(TypedDict):
    collection: str
    count: int
    bytes: int
    oldest: str | None
    newest: str | None


class DataStats(TypedDict):
    collections: list[CollectionStats]
