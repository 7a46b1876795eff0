"""Input schemas: what a person enters at a UX gate (its ``data.inputSchema``) and what a run's
input holds (the graph's ``inputSchema``), as JSON Schema, Draft 2020-12.

A schema is checked when the flow is saved (:func:`schema_problem`): it must be a valid schema
describing an object whose cost is bounded (:mod:`.bounded_schemas`: every ``$ref`` resolves
inside it, since Stitch never fetches a schema; patterns run on RE2; size, depth and references
within limits). The engine then refuses a completion or a run input that does not fit
(:func:`violations`), naming each field and what is wrong with it, or one whose check would
take more than its budget. A flow saved before schemas were checked may hold anything there:
what is not usable is ignored (:func:`usable`), so such a flow runs as it did.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

from agentloom.stitch import bounded_schemas
from agentloom.stitch.bounded_schemas import CallerGone, Cost, OverBudget
from agentloom.stitch.ids import shown

log = logging.getLogger(__name__)
EXAMPLE = '{"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}'
MAX_VIOLATIONS = 20  # a form with many wrong fields: the first ones are enough to fix
_GATHERED = 200  # errors read from the validator before they are ordered and the first ones kept
_SAVE_BUDGET = bounded_schemas.Budget(steps=20_000, cpu_seconds=0.5)  # the check against {} at save


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` cannot be an input schema (the end of a sentence about it), or None."""
    return check(schema).problem


def check(schema: object) -> bounded_schemas.Cost:
    """Whether ``schema`` can be an input schema (its problem, or None), and what checking a
    value against it costs (the subschemas it expands to)."""
    if not isinstance(schema, dict):
        return Cost(f"must be a JSON Schema object such as {EXAMPLE} (got {shown(schema)})")
    problem = bounded_schemas.size_problem(schema) or bounded_schemas.dialect_problem(schema)
    if problem is not None:
        return Cost(problem)
    problem = _meta_problem(schema)
    if problem is not None:
        return Cost(problem)
    if schema.get("type") != "object":
        return Cost(
            f'must describe an object: set "type": "object" at its top, with the fields under "properties" '
            f"(got type {shown(schema.get('type'))})"
        )
    found = bounded_schemas.cost(schema)
    if found.problem is not None:
        return found
    try:
        with bounded_schemas.metered(_SAVE_BUDGET):
            list(bounded_schemas.validator(schema).iter_errors({}))
    except RecursionError:
        return Cost(bounded_schemas.ENDLESS)
    except OverBudget:
        return Cost(_COSTLY)
    return found


_WORDED = 8 * 1024  # a schema up to this size that is not valid is explained by jsonschema (fast enough)


def _meta_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a valid JSON Schema, or None. The Rust check answers in
    microseconds; jsonschema's, whose words the designer shows, explains a small schema that
    is not valid (on a large one it may take seconds)."""
    try:
        jsonschema_rs.meta.validate(schema)
        return None
    except jsonschema_rs.ValidationError as exc:
        message, path = exc.message, [str(part) for part in exc.instance_path]
    except (RecursionError, ValueError):
        return f"nests subschemas more than {bounded_schemas.MAX_DEPTH} deep; flatten it with $defs"
    if bounded_schemas.size(schema) <= _WORDED:
        try:
            Draft202012Validator.check_schema(schema, format_checker=None)
        except SchemaError as exc:
            message, path = exc.message, [str(part) for part in exc.path]
        except RecursionError:
            pass
    where = ".".join(path)
    return (
        f"is not a valid JSON Schema (Draft 2020-12): {_bounded(message)}"
        + (f" at {where}" if where else "")
        + "; fix that keyword"
    )


_COSTLY = (
    "costs more than Stitch allows to check even an empty object (nested oneOf/anyOf over $refs multiply); "
    "share fewer references, or use allOf where any one branch would do"
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


def refuse_misfit(schema: dict[str, Any], value: Any, loc: tuple[str, ...], root: str) -> None:
    """Raise :class:`InputRefused` at ``loc`` when ``value`` does not fit ``schema``."""
    wrong = violations(schema, value, root)
    if wrong:
        raise InputRefused(loc, wrong)


def violations(schema: dict[str, Any], value: Any, root: str) -> list[Violation]:
    """How ``value`` breaks ``schema`` (empty when it fits), each naming its field; ``root``
    names the value itself (``input``, ``body``). Within the budget of
    :mod:`.bounded_schemas`; a caller that has left raises :class:`CallerGone`."""
    gathered: list[ValidationError] = []
    try:
        with bounded_schemas.metered():
            for error in bounded_schemas.validator(schema).iter_errors(value):
                gathered.append(error)
                if len(gathered) >= _GATHERED:
                    break
    except CallerGone:
        raise
    except OverBudget:
        return [
            Violation(
                (),
                f"{root}: could not be checked against the input schema within its budget "
                f"({bounded_schemas.STEPS:,} steps or {bounded_schemas.CPU_SECONDS:g} s of CPU); send a smaller "
                "value, or ask the flow's author for a simpler schema",
            )
        ]
    except RecursionError:  # a loop only some values reach: the flow's schema must change, not the value
        return [Violation((), f"{root}: cannot be checked: the input schema {bounded_schemas.ENDLESS}")]
    except (Unresolvable, ArithmeticError, ValueError, TypeError) as exc:
        log.warning("an input schema could not be applied to a value: %s: %s", type(exc).__name__, str(exc)[:200])
        return [
            Violation(
                (),
                f"{root}: cannot be checked against the input schema ({type(exc).__name__}); the flow's "
                "author must change the schema",
            )
        ]
    found: list[Violation] = []
    for error in sorted(gathered, key=_order):
        found.extend(_explained(error, root))
    unique = list(dict.fromkeys(found))
    if len(unique) > MAX_VIOLATIONS:
        rest = len(unique) - MAX_VIOLATIONS
        more = f"{rest}{'+' if len(gathered) >= _GATHERED else ''}"
        unique = [*unique[:MAX_VIOLATIONS], Violation((), f"{root}: ... and {more} more problem(s)")]
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
