"""Input schemas: what a person enters at a UX gate (its ``data.inputSchema``) and what a run's
input holds (the graph's ``inputSchema``), as JSON Schema, Draft 2020-12.

A schema is checked when the flow is saved (:func:`schema_problem`): it must be a valid schema
describing an object, and every ``$ref`` in it must resolve inside it (Stitch never fetches a
schema from elsewhere). The engine then refuses a completion or a run input that does not fit
(:func:`violations`), naming each field and what is wrong with it. A flow saved before schemas
were checked may hold anything there: what is not usable is ignored (:func:`usable`), so such
a flow runs as it did.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from agentloom.stitch.ids import shown

log = logging.getLogger(__name__)
EXAMPLE = '{"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}'
MAX_VIOLATIONS = 20  # a form with many wrong fields: the first ones are enough to fix
_BASE = "urn:stitch:input-schema"


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` cannot be an input schema (the end of a sentence about it), or None."""
    if not isinstance(schema, dict):
        return f"must be a JSON Schema object such as {EXAMPLE} (got {shown(schema)})"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(part) for part in exc.path)
        return (
            f"is not a valid JSON Schema (Draft 2020-12): {_bounded(exc.message)}"
            + (f" at {where}" if where else "")
            + "; fix that keyword"
        )
    if schema.get("type") != "object":
        return (
            f'must describe an object: set "type": "object" at its top, with the fields under "properties" '
            f"(got type {shown(schema.get('type'))})"
        )
    unresolved = _unresolved_ref(schema)
    if unresolved is not None:
        return (
            f"has a $ref that does not resolve inside the schema ({shown(unresolved)}); Stitch never fetches "
            'other schemas: put the definition under "$defs" and point at it with "#/$defs/NAME"'
        )
    try:
        list(Draft202012Validator(schema).iter_errors({}))
    except RecursionError:
        return _ENDLESS
    return None


_ENDLESS = (
    "refers to itself without end (a $ref that leads back to where it is, on the same value); "
    "make each reference go one level deeper, as a tree's children do"
)


def usable(schema: object) -> dict[str, Any] | None:
    """``schema`` when it is one a value can be checked against, else None."""
    return schema if isinstance(schema, dict) and schema_problem(schema) is None else None


@dataclass(frozen=True)
class Violation:
    """One way a value does not fit its schema: where (a path inside the value) and a message
    that starts with the field's name."""

    path: tuple[str | int, ...]
    message: str


class InputRefused(ValueError):
    """A value does not fit its input schema. ``loc`` is where the value sits in the request
    body (``("body", "input")`` for a run's input, ``("body",)`` for a completion)."""

    def __init__(self, loc: tuple[str, ...], violations: list[Violation]) -> None:
        super().__init__("; ".join(v.message for v in violations))
        self.loc = loc
        self.violations = violations

    def errors(self) -> list[dict[str, Any]]:
        """The 422's detail items."""
        return [{"loc": [*self.loc, *v.path], "msg": v.message, "type": "input_schema"} for v in self.violations]


def violations(schema: dict[str, Any], value: Any, root: str) -> list[Violation]:
    """How ``value`` breaks ``schema`` (empty when it fits), each naming its field; ``root``
    names the value itself (``input``, ``body``)."""
    try:
        errors = sorted(Draft202012Validator(schema).iter_errors(value), key=_order)
    except (Unresolvable, ValueError) as exc:  # a $ref the save-time check could not follow (a nested $id)
        log.warning("an input schema could not be used, so the value was not checked: %s", exc)
        return []
    except RecursionError:  # a loop only some values reach: the flow's schema must change, not the value
        return [Violation((), f"{root}: cannot be checked: the input schema {_ENDLESS}")]
    found: list[Violation] = []
    for error in errors:
        found.extend(_explained(error, root))
    unique = list(dict.fromkeys(found))
    if len(unique) > MAX_VIOLATIONS:
        rest = len(unique) - MAX_VIOLATIONS
        unique = [*unique[:MAX_VIOLATIONS], Violation((), f"{root}: ... and {rest} more problem(s)")]
    return unique


def _explained(error: ValidationError, root: str) -> list[Violation]:
    path = tuple(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        # One error per missing field; it names the field in its message only, so it is found here.
        missing = [name for name in error.validator_value if name not in error.instance]
        return [
            Violation((*path, name), f"{_field((*path, name), root)}: missing; this field is required, add it")
            for name in missing
        ]
    return [Violation(path, f"{_field(path, root)}: {_bounded(error.message)}")]


def _field(path: tuple[str | int, ...], root: str) -> str:
    return ".".join(str(part) for part in path) if path else root


def _order(error: ValidationError) -> tuple[list[str], str]:
    return [str(part) for part in error.absolute_path], error.message


def _bounded(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _unresolved_ref(schema: dict[str, Any]) -> str | None:
    resolver = Registry().with_resource(_BASE, DRAFT202012.create_resource(schema)).resolver(_BASE)
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except (Unresolvable, ValueError):  # ValueError: no URI at all, such as 'http://[::1'
            return ref
    return None


def _refs(value: Any) -> Iterator[str]:
    """Every ``$ref`` and ``$dynamicRef`` of a schema, but those under a subschema with its own
    ``$id`` (their references are relative to it; the validator resolves them, or ignores the schema)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item is not value and "$id" in item:
                continue
            for key in ("$ref", "$dynamicRef"):
                if isinstance(item.get(key), str):
                    yield item[key]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
