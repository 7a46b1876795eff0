"""Search filters in the form Chroma users know, checked and turned into what the store runs.

Chroma applies equality, comparison and list operators itself; a substring of a metadata
string ("$contains") it cannot, so the store applies those to candidates in Python before
the vector search. Timestamps (created_at, updated_at) are stored as epoch seconds and
accept ISO dates in filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from agentloom.core.errors import AgentloomError

ACCEPTED = (
    'accepted: {"field": value}, {"field": {"$eq|$ne|$gt|$gte|$lt|$lte": v}}, '
    '{"field": {"$in|$nin": [v, ...]}}, {"field": {"$contains": "text"}}, {"$and": [filter, ...]}'
)
COMPARE = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
RANGE = {"$gt", "$gte", "$lt", "$lte"}
LISTS = {"$in", "$nin"}
SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class FilterPlan:
    where: dict[str, Any] | None
    substrings: tuple[tuple[str, str], ...]
    document_contains: str | None

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        for field, needle in self.substrings:
            value = metadata.get(field)
            if not isinstance(value, str) or needle not in value:
                return False
        return True


def _fail(where: str, problem: str) -> AgentloomError:
    return AgentloomError(f"{where}: {problem}; {ACCEPTED}")


def _timestamp(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise _fail(where, "a timestamp must be a number of seconds or an ISO date")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _fail(where, f"{value!r} is not an ISO date such as 2026-01-31 or 2026-01-31T10:00:00Z") from None
        if isinstance(parsed, date) and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    raise _fail(where, f"a timestamp must be a number or an ISO date, got {type(value).__name__}")


def _conditions(field: str, spec: Any, timestamps: frozenset[str], subs: list[tuple[str, str]]) -> list[dict]:
    where = f'filter["{field}"]'
    if not field or field.startswith("$"):
        raise _fail(where, "unknown operator at the top level (only $and and $or)" if field.startswith("$")
                    else "field names must be non-empty")
    if not isinstance(spec, Mapping):
        if isinstance(spec, SCALARS):
            value = _timestamp(spec, where) if field in timestamps and isinstance(spec, str) else spec
            return [{field: {"$eq": value}}]
        raise _fail(where, f"a value must be a string, number or boolean, got {type(spec).__name__}")
    if not spec:
        raise _fail(where, "an empty operator object")
    out = []
    for op, value in spec.items():
        at = f"{where}[{op!r}]"
        if op in COMPARE:
            if field in timestamps and op in RANGE:
                value = _timestamp(value, at)
            elif not isinstance(value, SCALARS):
                raise _fail(at, f"needs a string, number or boolean, got {type(value).__name__}")
            elif op in RANGE and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise _fail(at, f"ranges compare numbers (or ISO dates on timestamps), got {value!r}")
            out.append({field: {op: value}})
        elif op in LISTS:
            if not isinstance(value, list) or not value or not all(isinstance(v, SCALARS) for v in value):
                raise _fail(at, "needs a non-empty list of strings, numbers or booleans")
            out.append({field: {op: value}})
        elif op == "$contains":
            if not isinstance(value, str) or not value:
                raise _fail(at, "needs a non-empty string to look for")
            subs.append((field, value))
        else:
            raise _fail(where, f"unknown operator {op!r}")
    return out


def _parse(node: Any, timestamps: frozenset[str], subs: list[tuple[str, str]], path: str, in_or: bool) -> list[dict]:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a filter must be an object, got {type(node).__name__}")
    out: list[dict] = []
    for key, value in node.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise _fail(f"{path}[{key!r}]", "needs a non-empty list of filters")
            parts = [_parse(v, timestamps, subs, f"{path}[{key!r}][{i}]", in_or or key == "$or")
                     for i, v in enumerate(value)]
            if key == "$and":
                out.extend(c for p in parts for c in p)
            else:
                branches = [_combine(p) for p in parts if p]
                out.append(branches[0] if len(branches) == 1 else {"$or": branches})
        else:
            before = len(subs)
            out.extend(_conditions(str(key), value, timestamps, subs))
            if in_or and len(subs) > before:
                raise _fail(f"{path}[{key!r}]", "$contains cannot be used inside $or")
    return out


def _combine(conditions: list[dict]) -> dict[str, Any]:
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}


def parse_filter(
    filter: Mapping[str, Any] | None,
    document_contains: str | None = None,
    *,
    timestamp_fields: frozenset[str] = frozenset({"created_at", "updated_at"}),
) -> FilterPlan:
    if document_contains is not None and (not isinstance(document_contains, str) or not document_contains):
        raise AgentloomError("document_contains must be a non-empty string (a substring of the chunk text).")
    subs: list[tuple[str, str]] = []
    conditions = _parse(filter, timestamp_fields, subs, "filter", False) if filter else []
    return FilterPlan(_combine(conditions) if conditions else None, tuple(subs), document_contains)
