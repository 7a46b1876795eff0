"""Search filters in the form Chroma users know, checked and turned into what the store runs.

Chroma applies equality, comparison and list operators itself; a substring of a metadata
string ("$contains") it cannot, so the store applies those to candidates in Python before
the vector search. Timestamps (created_at, updated_at) are stored as epoch seconds and
accept ISO dates in filters.

Limits keep every filter within what Chroma's SQLite can run (it fails past ~16,000 values
with "too many SQL variables") and each refusal says which limit: at most 1,000 values in
one ``$in``/``$nin`` list, 5,000 values in a whole filter, 32 levels of nesting, 1,000
characters in ``document_contains``, integers within 64 bits, and one type per list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentloom.core.errors import AgentloomError
from agentloom.core.timestamps import parse

ACCEPTED = (
    'accepted: {"field": value}, {"field": {"$eq|$ne|$gt|$gte|$lt|$lte": v}}, '
    '{"field": {"$in|$nin": [v, ...]}}, {"field": {"$contains": "text"}}, '
    '{"$and": [filter, ...]}, {"$or": [filter, ...]}'
)
COMPARE = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
RANGE = {"$gt", "$gte", "$lt", "$lte"}
LISTS = {"$in", "$nin"}
SCALARS = (str, int, float, bool)
MAX_LIST_VALUES = 1000
MAX_FILTER_VALUES = 5000
MAX_DEPTH = 32
MAX_CONTAINS_CHARS = 1000
INT64 = (-(2**63), 2**63 - 1)

# One Chroma where clause: {field: {op: value}}, {"$and"|"$or": [clause, ...]}.
Clause = dict[str, Any]


@dataclass(frozen=True)
class FilterPlan:
    where: Clause | None
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


def _scalar(value: Any, where: str) -> Any:
    """A value Chroma can compare: a string, a boolean, a 64-bit integer or a finite number."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        raise _fail(
            where, f"{value} does not fit in a 64-bit integer (Chroma's limit); pass it as a decimal or a string"
        )
    if isinstance(value, float) and math.isnan(value):
        raise _fail(where, "NaN matches nothing; pass a number")
    return value


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "decimal", str: "string"}.get(type(value), type(value).__name__)


def _timestamp(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise _fail(where, "a timestamp must be a number of seconds or an ISO date")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return parse(value).timestamp()
        except ValueError:
            raise _fail(where, f"{value!r} is not an ISO date such as 2026-01-31 or 2026-01-31T10:00:00Z") from None
    raise _fail(where, f"a timestamp must be a number or an ISO date, got {type(value).__name__}")


class _Parse:
    """One filter's parse: the timestamp fields, the substring conditions, the values counted so far."""

    def __init__(self, timestamps: frozenset[str]) -> None:
        self.timestamps = timestamps
        self.subs: list[tuple[str, str]] = []
        self.values = 0

    def count(self, n: int, where: str) -> None:
        self.values += n
        if self.values > MAX_FILTER_VALUES:
            raise _fail(
                where,
                f"the filter holds more than {MAX_FILTER_VALUES:,} values in all, the most one search "
                "takes; split the search or filter on a coarser field",
            )


def _conditions(field: str, spec: Any, state: _Parse) -> list[Clause]:
    where = f'filter["{field}"]'
    timestamps = state.timestamps
    if not field or field.startswith("$"):
        raise _fail(
            where,
            "unknown operator at the top level (only $and and $or)"
            if field.startswith("$")
            else "field names must be non-empty",
        )
    if not isinstance(spec, Mapping):
        if isinstance(spec, SCALARS):
            state.count(1, where)
            value = _timestamp(spec, where) if field in timestamps and isinstance(spec, str) else _scalar(spec, where)
            return [{field: {"$eq": value}}]
        raise _fail(where, f"a value must be a string, number or boolean, got {type(spec).__name__}")
    if not spec:
        raise _fail(where, "an empty operator object")
    out: list[Clause] = []
    for op, value in spec.items():
        at = f"{where}[{op!r}]"
        if op in COMPARE:
            state.count(1, at)
            if field in timestamps and op in RANGE:
                value = _timestamp(value, at)
            elif not isinstance(value, SCALARS):
                raise _fail(at, f"needs a string, number or boolean, got {type(value).__name__}")
            elif op in RANGE and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise _fail(at, f"ranges compare numbers (or ISO dates on timestamps), got {value!r}")
            out.append({field: {op: _scalar(value, at)}})
        elif op in LISTS:
            if not isinstance(value, list) or not value or not all(isinstance(v, SCALARS) for v in value):
                raise _fail(at, "needs a non-empty list of strings, numbers or booleans")
            if len(value) > MAX_LIST_VALUES:
                raise _fail(
                    at,
                    f"has {len(value):,} values; at most {MAX_LIST_VALUES:,} are allowed in one {op} list "
                    "(Chroma cannot run much longer lists); split the search or filter on a coarser field",
                )
            state.count(len(value), at)
            kinds = sorted({_type_name(v) for v in value})
            if len(kinds) > 1:
                raise _fail(
                    at,
                    f"mixes {' and '.join(kinds)} values; Chroma compares one type per list, "
                    "so make them all strings, all integers, all decimals or all booleans",
                )
            out.append({field: {op: [_scalar(v, at) for v in value]}})
        elif op == "$contains":
            if not isinstance(value, str) or not value:
                raise _fail(at, "needs a non-empty string to look for")
            state.subs.append((field, value))
        else:
            raise _fail(where, f"unknown operator {op!r}")
    return out


def _parse(node: Any, state: _Parse, path: str, in_or: bool, depth: int = 1) -> list[Clause]:
    if not isinstance(node, Mapping):
        raise _fail(path, f"a filter must be an object, got {type(node).__name__}")
    if depth > MAX_DEPTH:
        raise _fail(path, f"nested more than {MAX_DEPTH} levels deep; flatten the $and/$or groups")
    out: list[Clause] = []
    for key, value in node.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise _fail(f"{path}[{key!r}]", "needs a non-empty list of filters")
            parts = [
                _parse(v, state, f"{path}[{key!r}][{i}]", in_or or key == "$or", depth + 1) for i, v in enumerate(value)
            ]
            if key == "$and":
                out.extend(c for p in parts for c in p)
            else:
                branches = [_combine(p) for p in parts if p]
                out.append(branches[0] if len(branches) == 1 else {"$or": branches})
        else:
            before = len(state.subs)
            out.extend(_conditions(str(key), value, state))
            if in_or and len(state.subs) > before:
                raise _fail(f"{path}[{key!r}]", "$contains cannot be used inside $or")
    return out


def _combine(conditions: list[Clause]) -> Clause:
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}


def parse_filter(
    filter: Mapping[str, Any] | None,
    document_contains: str | None = None,
    *,
    timestamp_fields: frozenset[str] = frozenset({"created_at", "updated_at"}),
) -> FilterPlan:
    if document_contains is not None and (not isinstance(document_contains, str) or not document_contains):
        raise AgentloomError("document_contains must be a non-empty string (a substring of the chunk text).")
    if document_contains is not None and len(document_contains) > MAX_CONTAINS_CHARS:
        raise AgentloomError(
            f"document_contains has {len(document_contains):,} characters; at most {MAX_CONTAINS_CHARS:,} are "
            "allowed (Chroma's text match cannot take longer patterns): pass a shorter, distinctive substring."
        )
    state = _Parse(timestamp_fields)
    conditions = _parse(filter, state, "filter", False) if filter else []
    return FilterPlan(_combine(conditions) if conditions else None, tuple(state.subs), document_contains)
