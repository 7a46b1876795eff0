"""What changed between two versions of a flow's graph: nodes and edges matched by id.

A node whose position alone changed has *moved* (the canvas, not the flow); any other key that
changed is named in ``changed`` (``type``, ``data.webhookUrl``: a key of ``data`` by its own
name). JSON values are compared as JSON: ``1`` and ``1.0`` are the same number, ``true`` is
not ``1``, and a key set to null differs from a key left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

MOVED = ("position", "positionAbsolute")  # where a node sits on the canvas (positionAbsolute: React Flow 11)
_ABSENT = object()


@dataclass(frozen=True)
class Changed:
    id: str
    fields: list[str]


@dataclass
class PartsDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[Changed] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)

    def as_json(self, *, moved: bool) -> dict[str, Any]:
        found: dict[str, Any] = {
            "added": self.added,
            "removed": self.removed,
            "changed": [{"id": c.id, "fields": c.fields} for c in self.changed],
        }
        if moved:
            found["moved"] = self.moved
        return found


def diff(before: Any, after: Any) -> dict[str, Any]:
    """``{"nodes": {added, removed, changed, moved}, "edges": {added, removed, changed}}``."""
    nodes = _parts(_by_id(_items(before, "nodes")), _by_id(_items(after, "nodes")), MOVED)
    edges = _parts(_by_id(_items(before, "edges")), _by_id(_items(after, "edges")), ())
    return {"nodes": nodes.as_json(moved=True), "edges": edges.as_json(moved=False)}


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same (numbers by value, but a boolean is no number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _items(graph: Any, key: str) -> list[Any]:
    items = graph.get(key) if isinstance(graph, dict) else None
    return items if isinstance(items, list) else []


def _by_id(items: Iterable[Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            found.setdefault(item["id"], item)  # a saved graph has unique ids; the first one counts
    return found


def _parts(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], moved: tuple[str, ...]) -> PartsDiff:
    found = PartsDiff()
    found.removed = [part_id for part_id in before if part_id not in after]
    for part_id, new in after.items():
        old = before.get(part_id)
        if old is None:
            found.added.append(part_id)
            continue
        fields = _changed_fields(old, new, skip=moved)
        if fields:
            found.changed.append(Changed(part_id, fields))
        if any(not same_json(old.get(key, _ABSENT), new.get(key, _ABSENT)) for key in moved):
            found.moved.append(part_id)
    return found


def _changed_fields(old: dict[str, Any], new: dict[str, Any], skip: tuple[str, ...]) -> list[str]:
    fields = []
    for key in _keys(old, new):
        if key in skip:
            continue
        a, b = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if key == "data" and isinstance(a, dict) and isinstance(b, dict):
            fields += [f"data.{k}" for k in _keys(a, b) if not _same(a.get(k, _ABSENT), b.get(k, _ABSENT))]
        elif not _same(a, b):
            fields.append(key)
    return fields


def _same(a: Any, b: Any) -> bool:
    return a is b if a is _ABSENT or b is _ABSENT else same_json(a, b)


def _keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [*a, *(key for key in b if key not in a)]
