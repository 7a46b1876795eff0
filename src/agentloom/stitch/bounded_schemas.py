"""JSON Schema (Draft 2020-12) evaluated within bounds that a hostile schema or value cannot pass.

jsonschema evaluates a schema as written, and a schema is a small program: it may name URLs to
fetch, a pattern that backtracks for ever, references that fan out exponentially, a value whose
check is quadratic. Stitch takes schemas from whoever authors a flow and values from whoever
answers a gate, so every cost is bounded here, in three places:

- :func:`cost_problem`, when a schema is saved: its size, depth, references and patterns, and
  how many subschemas it expands to when its references are followed; every ``$ref`` must
  resolve inside the schema itself (nothing is ever retrieved), and every pattern must compile
  in RE2, whose matching time is linear in the text.
- :data:`BoundedValidator`, jsonschema's Draft 2020-12 validator with its pattern keywords on
  RE2, ``uniqueItems`` in linear time, ``multipleOf`` exact for any JSON number, and every
  keyword counted against a :class:`Budget`.
- :func:`metered`, around one evaluation: the budget's steps and CPU seconds, and the caller's
  cancel flag (:data:`CALLER_GONE`, set by the HTTP API when the client leaves), checked as the
  evaluation goes; past either, :class:`OverBudget` or :class:`CallerGone` is raised.

The limits are listed in docs/stitch-operations.md ("Input schemas").
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from agentloom.stitch.ids import shown

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_SCHEMA_BYTES = 64 * 1024  # the schema as compact JSON
MAX_GRAPH_BYTES = 256 * 1024  # a flow's input schemas as compact JSON, added up
MAX_DEPTH = 32  # subschemas inside subschemas
MAX_REFS = 200  # $ref and $dynamicRef keywords
MAX_EXPANDED = 10_000  # subschemas visited from the root, each reference followed (a recursion once)
MAX_GRAPH_EXPANDED = 20_000  # the same, added up over a flow's input schemas
MAX_PATTERN = 2_000  # characters of one pattern
STEPS = 100_000  # keyword evaluations for one value
CPU_SECONDS = 0.5  # of the evaluating thread, for one value

# Keywords whose value is one subschema, a list of them, or a map of names to them (Draft 2020-12).
_ONE = (
    *("additionalProperties", "contains", "else", "if", "items", "not", "propertyNames", "then"),
    *("unevaluatedItems", "unevaluatedProperties", "contentSchema"),
)
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")
# Those always applied to the same value (not to a part of it): a loop through them alone never
# ends. ("then", "else" and "dependentSchemas" apply to the same value only when it meets their
# condition: a loop through them is refused when a value reaches it.)
_IN_PLACE = frozenset(("allOf", "anyOf", "oneOf", "not", "if"))
_DEFINITIONS = frozenset(("$defs", "definitions"))  # reached only through a reference

CALLER_GONE: ContextVar[threading.Event | None] = ContextVar("stitch_caller_gone", default=None)


class OverBudget(Exception):
    """The evaluation took more steps or CPU time than its budget allows."""


class CallerGone(Exception):
    """The client whose request asked for the evaluation has left."""


@dataclass(frozen=True)
class Budget:
    steps: int = STEPS
    cpu_seconds: float = CPU_SECONDS


class _Meter:
    __slots__ = ("left", "deadline", "gone", "since_check")

    def __init__(self, budget: Budget, gone: threading.Event | None) -> None:
        self.left = budget.steps
        self.deadline = time.thread_time() + budget.cpu_seconds
        self.gone = gone
        self.since_check = 0

    def step(self, steps: int = 1) -> None:
        self.left -= steps
        self.since_check += steps
        if self.left < 0:
            raise OverBudget
        if self.since_check >= 64:
            self.since_check = 0
            if time.thread_time() > self.deadline:
                raise OverBudget
            if self.gone is not None and self.gone.is_set():
                raise CallerGone


_METER: ContextVar[_Meter | None] = ContextVar("stitch_schema_meter", default=None)


# Evaluations running at once in a process: the others wait their turn (the event loop, which
# answers every other request, shares the GIL with these threads only).
_RUNNING = threading.BoundedSemaphore(2)


@contextmanager
def metered(budget: Budget = Budget()) -> Iterator[None]:
    """Count every keyword evaluated inside against ``budget`` (and the caller's presence)."""
    gone = CALLER_GONE.get()
    while not _RUNNING.acquire(timeout=0.05):
        if gone is not None and gone.is_set():
            raise CallerGone
    try:
        if gone is not None and gone.is_set():
            raise CallerGone
        token = _METER.set(_Meter(budget, gone))
        try:
            yield
        finally:
            _METER.reset(token)
    finally:
        _RUNNING.release()


# -- the validator ----------------------------------------------------------------------------
# A registry of its own retrieves nothing: a reference that is not inside the schema is
# unresolvable (jsonschema's default registry would fetch it with urlopen).
NO_RETRIEVAL: Registry[Any] = Registry()


class BadPattern(ValueError):
    """A pattern RE2 does not take (or one too long); the message says why."""


@lru_cache(maxsize=512)
def compiled(pattern: str) -> Any:
    """``pattern`` (ECMA-262, as JSON Schema writes it) compiled by RE2."""
    if len(pattern) > MAX_PATTERN:
        raise BadPattern(f"is {len(pattern)} characters long; patterns may have at most {MAX_PATTERN}")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(_as_re2(pattern), options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise BadPattern(
            f"cannot be used ({reason}); Stitch runs patterns in time linear in the text, without lookahead, "
            "lookbehind or backreferences: rewrite the pattern without them"
        ) from None


def _as_re2(pattern: str) -> str:
    """ECMA-262's ``\\uXXXX`` and ``\\u{X...}`` escapes as RE2 writes them (``\\x{...}``)."""
    if "\\u" not in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            following = pattern[i + 1]
            if following == "u" and pattern[i + 2 : i + 3] == "{":
                end = pattern.find("}", i + 3)
                if end > 0:
                    out.append("\\x{" + pattern[i + 3 : end] + "}")
                    i = end + 1
                    continue
            if following == "u" and len(pattern[i + 2 : i + 6]) == 4 and _hex(pattern[i + 2 : i + 6]):
                out.append("\\x{" + pattern[i + 2 : i + 6] + "}")
                i += 6
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def _search(pattern: str, text: str) -> bool:
    """One search, counted as a step per thousand (character, pattern instruction) pairs: RE2
    is linear in the text, but a pattern such as ``[ab]*a[ab]{999}c`` costs a thousand steps a
    character once RE2 gives up its DFA."""
    found = compiled(pattern)
    meter = _METER.get()
    if meter is not None:
        meter.step(1 + len(text) * found.programsize // 1_000)
    return found.search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


_PLAIN = Draft202012Validator.VALIDATORS


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if "patternProperties" not in schema:  # no pattern involved: jsonschema's own
        yield from _PLAIN["additionalProperties"](validator, additional, instance, schema) or ()
        return
    if not validator.is_type(instance, "object"):
        return
    named, patterns = schema.get("properties", {}), list(schema["patternProperties"])
    extras = [n for n in instance if n not in named and not any(_search(p, n) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        verb = "does" if len(extras) == 1 else "do"
        listed = ", ".join(repr(each) for each in sorted(extras))
        yield ValidationError(f"{listed} {verb} not match any of the regexes: {', '.join(map(repr, sorted(patterns)))}")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = _equality_key(item)
            if key in seen:
                yield ValidationError(f"{shown(instance)} has non-unique elements")
                return
            seen.add(key)


def _equality_key(value: Any) -> Any:
    """A hashable key equal for two values exactly when JSON Schema calls them equal (1 and
    1.0 are; true and 1 are not; object keys in any order)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", value)  # Python's 1 == 1.0 with one hash, as JSON Schema's equality
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_equality_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, _equality_key(item)) for name, item in value.items()))
    return ("other", repr(value))


def _multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "number"):
        return
    try:
        if isinstance(divisor, float) or isinstance(instance, float):
            quotient = instance / divisor
            failed = int(quotient) != quotient
        else:
            failed = bool(instance % divisor)
    except (OverflowError, ValueError):  # beyond a float (10**400 / 0.5): exactly, as the decimals read
        failed = (_exact(instance) / _exact(divisor)).denominator != 1
    if failed:
        yield ValidationError(f"{shown(instance)} is not a multiple of {divisor}")


def _exact(number: int | float) -> Fraction:
    return Fraction(number) if isinstance(number, int) else Fraction(repr(number))


def _counted(keyword: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        meter = _METER.get()
        if meter is not None:
            meter.step()
        yield from keyword(validator, value, instance, schema) or ()

    return counted


_OURS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
    "multipleOf": _multiple_of,
}
# No format checker: "format" is an annotation, as Draft 2020-12 says by default.
BoundedValidator: Any = validators.extend(
    Draft202012Validator, {name: _counted(_OURS.get(name, keyword)) for name, keyword in _PLAIN.items()}
)


def validator(schema: dict[str, Any]) -> Any:
    """A validator of ``schema`` that retrieves nothing and counts its steps under :func:`metered`."""
    return BoundedValidator(schema, registry=NO_RETRIEVAL)


# -- what a schema may cost, known before it is used --------------------------------------------
def size(schema: dict[str, Any]) -> int:
    return len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode(errors="surrogatepass"))


def size_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is too large to be looked at further, or None."""
    found = size(schema)
    if found > MAX_SCHEMA_BYTES:
        return f"is {found:,} bytes as JSON; an input schema may have at most {MAX_SCHEMA_BYTES:,}: make it smaller"
    return None


def dialect_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` names a dialect Stitch does not check (or one elsewhere than at its top),
    or None. Looked at before anything else reads the schema: a validator given another
    ``$schema`` URL would fetch it."""
    if schema.get("$schema", DIALECT) != DIALECT:
        return (
            f'says "$schema": {shown(str(schema["$schema"]))}; Stitch checks Draft 2020-12: '
            f'set it to "{DIALECT}" or remove it'
        )
    stack = list(_children(schema, ""))
    while stack:
        node, pointer = stack.pop()
        if isinstance(node, dict):
            if "$schema" in node:
                return f"has $schema at {_where(pointer)}; only the top may say it (Draft 2020-12): remove it there"
            stack.extend(_children(node, pointer))
    return None


@dataclass(frozen=True)
class Cost:
    """What :func:`cost` found: the problem (or None) and how many subschemas the schema
    expands to when its references are followed (what checking a value visits at each place)."""

    problem: str | None
    expanded: int = 0


def cost_problem(schema: dict[str, Any]) -> str | None:
    return cost(schema).problem


def cost(schema: dict[str, Any]) -> Cost:
    """Why ``schema`` may not be used as it is (the end of a sentence about it, or None), and
    what it expands to. The schema is no larger than :func:`size_problem` allows and has passed
    the meta-schema."""
    given_id = schema.get("$id")
    root_uri = given_id if isinstance(given_id, str) else "urn:stitch:input-schema"
    try:
        registry = NO_RETRIEVAL.with_resource(root_uri, DRAFT202012.create_resource(schema)).crawl()
        root = registry.resolver(root_uri)
    except (Unresolvable, ValueError, TypeError) as exc:
        return Cost(f"has an $id Stitch cannot use ({shown(str(exc), 120)}); remove it")
    walked: set[int] = set()  # every subschema the checks below looked at, by identity
    problem = _structure_problem(schema, root, walked)
    if problem is not None:
        return Cost(problem)
    return _expansion(schema, root, walked)


def _structure_problem(schema: dict[str, Any], root: Any, walked: set[int]) -> str | None:
    """Depth, references (each resolving inside the schema), patterns: every subschema once."""
    refs = 0
    pattern_properties: bool | None = None  # anywhere in the schema; looked for once, when it matters
    stack: list[tuple[Any, str, int, Any]] = [(schema, "", 0, root)]
    while stack:
        node, pointer, depth, resolver = stack.pop()
        if not isinstance(node, dict):
            continue
        walked.add(id(node))
        if depth > MAX_DEPTH:
            return f"nests subschemas more than {MAX_DEPTH} deep (at {_where(pointer)}); flatten it with $defs"
        if pointer and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        if "unevaluatedProperties" in node and pattern_properties is not False:
            pattern_properties = _has_key(schema, "patternProperties")
        if "unevaluatedProperties" in node and pattern_properties:
            return (
                f"has unevaluatedProperties (at {_where(pointer)}) in a schema with patternProperties; Stitch "
                "cannot check the two together in bounded time: use additionalProperties, or name the properties"
            )
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if isinstance(ref, str):
                refs += 1
                if refs > MAX_REFS:
                    return f"has more than {MAX_REFS} references ($ref, $dynamicRef); use fewer"
                try:
                    resolver.lookup(ref)
                except (Unresolvable, ValueError):
                    return (
                        f"has a {key} at {_where(pointer)} that does not resolve inside the schema ({shown(ref)}); "
                        'Stitch never fetches schemas: put the definition under "$defs" and point at it with '
                        '"#/$defs/NAME"'
                    )
        patterns = [("pattern", node["pattern"])] if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), dict):
            patterns += [("patternProperties", name) for name in node["patternProperties"]]
        for keyword, pattern in patterns:
            try:
                compiled(pattern)
            except BadPattern as exc:
                return f"has a pattern at {_where(pointer + '/' + keyword)}, {shown(pattern)}, that {exc}"
        stack.extend((child, child_pointer, depth + 1, resolver) for child, child_pointer in _children(node, pointer))
    return None


def _expansion(schema: dict[str, Any], root: Any, walked: set[int]) -> Cost:
    """Follow every reference from the root: a loop back to a schema on the way counts once,
    but a loop that never moves into a part of the value is endless; more than
    :data:`MAX_EXPANDED` subschemas in all is too costly. A reference must lead to a subschema
    (not into ``const``, ``enum`` or a keyword Stitch does not know), which the walk checked."""
    visited = 0
    # (subschema, its pointer, resolver, schemas on the way, those since the value last moved)
    stack: list[tuple[Any, str, Any, frozenset[int], frozenset[int]]] = [(schema, "", root, frozenset(), frozenset())]
    while stack:
        node, pointer, resolver, on_way, in_place = stack.pop()
        if not isinstance(node, dict):
            continue
        visited += 1
        if visited > MAX_EXPANDED:
            return Cost(
                f"expands to more than {MAX_EXPANDED:,} subschemas when its references are followed (as nested "
                "oneOf/anyOf over $refs do); an input schema may cost at most that: share fewer references"
            )
        if pointer and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if not isinstance(ref, str):
                continue
            target = resolver.lookup(ref)  # resolves: _structure_problem checked every reference first
            mark = id(target.contents)
            if isinstance(target.contents, dict) and mark not in walked:
                return Cost(
                    f"has a {key} at {_where(pointer)}, {shown(ref)}, that leads to a part of the schema that is "
                    "not a subschema (inside const, enum or an unknown keyword); point it at one under $defs"
                )
            if mark in in_place or target.contents is node:
                return Cost(ENDLESS)
            if mark not in on_way:
                stack.append((target.contents, f"{pointer}/{key}", target.resolver, on_way | {mark}, in_place | {mark}))
        for child, child_pointer in _children(node, pointer, definitions=False):
            keyword = child_pointer[len(pointer) + 1 :].split("/", 1)[0]
            stack.append((child, child_pointer, resolver, on_way, in_place if keyword in _IN_PLACE else frozenset()))
    return Cost(None, visited)


ENDLESS = (
    "refers to itself without end (a $ref that leads back to where it is, on the same value); "
    "make each reference go one level deeper, as a tree's children do"
)


def _children(node: dict[str, Any], pointer: str, definitions: bool = True) -> Iterator[tuple[Any, str]]:
    for key in _ONE:
        if isinstance(node.get(key), dict):
            yield node[key], f"{pointer}/{key}"
    for key in _LIST:
        if isinstance(node.get(key), list):
            for i, child in enumerate(node[key]):
                yield child, f"{pointer}/{key}/{i}"
    for key in _MAP:
        if isinstance(node.get(key), dict) and (definitions or key not in _DEFINITIONS):
            for name, child in node[key].items():
                yield child, f"{pointer}/{key}/{_escaped(name)}"


def _has_key(value: Any, key: str) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if key in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _escaped(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _where(pointer: str) -> str:
    return shown(pointer, 120) if pointer else "its top"
