"""The JSON Stitch accepts: values both databases can store and every answer can return.

Python's ``json`` module accepts more than that, and the two databases disagree about the
rest: a lone surrogate (``"\\ud800"``) cannot be encoded as UTF-8 for an answer, NUL
characters cannot be stored in PostgreSQL text or JSONB, NaN and Infinity are not JSON at all
(PostgreSQL refuses them, SQLite stores them and answers ``null``), and a value nested a few
hundred levels deep can be stored but not serialised again. Each request body is checked
once, right after it is decoded and before anything is written, so a bad value is a 422
naming what and where (a JSON path) on SQLite and PostgreSQL alike, never a stored run that
answers 500 afterwards.

The check is one iterative pass over the decoded body (floats through ``math.isfinite``, a
depth counter per container, strings and keys collected) and one regex search over all the
strings joined; only a body with a problem is walked again to find its JSON path.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

# The deepest nesting a request body may have. Answers wrap stored values in a few more
# levels (run -> node_states -> node -> output), merges and Collectors add one each, and the
# answer serialiser stops at about 250; 64 leaves room for all of that.
MAX_DEPTH = 64

_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Problem:
    loc: tuple[str | int, ...]  # inside the body, FastAPI style
    message: str

    @property
    def path(self) -> str:
        return json_path(self.loc)

    def as_error(self, prefix: tuple[str, ...] = ("body",)) -> dict[str, Any]:
        # A key holding a lone surrogate cannot be written in any answer: it is named escaped.
        loc = [part if isinstance(part, int) else _answerable(part) for part in self.loc]
        return {"type": "json_value", "loc": [*prefix, *loc], "msg": f"{self.path}: {self.message}"}


def _answerable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``), so it can be encoded."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(text) else text


def json_path(loc: tuple[str | int, ...]) -> str:
    parts = ["$"]
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part.isidentifier():
            parts.append(f".{part}")
        else:
            parts.append(f"[{json.dumps(part, ensure_ascii=True)}]")
    path = "".join(parts)
    return path if len(path) <= 160 else f"{path[:100]}...{path[-50:]}"


def decode(body: bytes) -> Any:
    """The decoded body, or :class:`BadJson` naming the first problem and where it is."""
    try:
        value = json.loads(body)
    except RecursionError:
        raise BadJson(Problem((), f"JSON nested more than {MAX_DEPTH} levels deep")) from None
    except json.JSONDecodeError as exc:
        raise BadJson(
            Problem((), f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"), "json_invalid"
        ) from None
    except UnicodeDecodeError:
        raise BadJson(Problem((), "not valid JSON: the body is not UTF-8 text"), "json_invalid") from None
    except ValueError as exc:  # for instance an integer with more digits than Python converts
        raise BadJson(Problem((), f"not valid JSON: {exc}"), "json_invalid") from None
    problem = find_problem(value)
    if problem is not None:
        raise BadJson(problem)
    return value


class BadJson(ValueError):
    def __init__(self, problem: Problem, kind: str = "json_value") -> None:
        super().__init__(f"{problem.path}: {problem.message}")
        self.problem = problem
        self.kind = kind

    def errors(self) -> list[dict[str, Any]]:
        return [{**self.problem.as_error(), "type": self.kind}]


def find_problem(value: Any, max_depth: int = MAX_DEPTH) -> Problem | None:
    """The first value in ``value`` that cannot be stored or returned, or None.

    The common case (nothing wrong) is one pass that only collects strings and checks floats
    and depth; every string and key is then searched at once, by one regex over their join.
    Only when something is wrong does :func:`_locate` walk again to say where.
    """
    kind = type(value)
    if kind is not dict and kind is not list:
        problem = _scalar_problem(value)
        return None if problem is None else Problem((), problem)
    strings: list[str] = []
    collect, collect_all = strings.append, strings.extend
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    isfinite = math.isfinite
    while stack:
        container, depth = pop()
        if depth > max_depth:
            return _locate(value, max_depth)
        if type(container) is dict:
            collect_all(container)  # the keys
            items: Any = container.values()
        else:
            items = container
        for item in items:
            kind = type(item)
            if kind is str:
                collect(item)
            elif kind is dict or kind is list:
                push((item, depth + 1))
            elif kind is float:
                if not isfinite(item):
                    return _locate(value, max_depth)
            elif kind is not int and kind is not bool and item is not None:
                return _locate(value, max_depth)
    try:
        joined = "\x01".join(strings)
    except TypeError:  # a key that is not a string: not from JSON, but say where
        return _locate(value, max_depth)
    return _locate(value, max_depth) if _BAD_CHARACTER.search(joined) else None


def _locate(value: Any, max_depth: int) -> Problem | None:
    """The first problem and its place: a slower walk that keeps the path of every container."""
    problem = _scalar_problem(value)
    if problem is not None:
        return Problem((), problem)
    if not isinstance(value, (dict, list)):
        return None
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        container, loc = stack.pop()
        if len(loc) >= max_depth:
            return Problem(loc, f"JSON nested more than {max_depth} levels deep")
        items = container.items() if type(container) is dict else enumerate(container)
        for key, item in items:
            if type(key) is not str and type(container) is dict:
                return Problem((*loc, str(key)), f"keys must be strings, not {type(key).__name__}")
            if type(key) is str and _BAD_CHARACTER.search(key):
                return Problem((*loc, key), f"the key {_describe(key)}")
            if isinstance(item, (dict, list)):
                stack.append((item, (*loc, key)))
                continue
            problem = _scalar_problem(item)
            if problem is not None:
                return Problem((*loc, key), problem)
    return None


_NOT_FINITE = "NaN and Infinity are not JSON numbers; send null, a finite number or a string"


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, str):
        return f"the string {_describe(value)}" if _BAD_CHARACTER.search(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else _NOT_FINITE
    if value is None or isinstance(value, (bool, int, dict, list)):
        return None
    return f"{type(value).__name__} is not a JSON value"


def _describe(text: str) -> str:
    found = _BAD_CHARACTER.search(text)
    assert found is not None
    char = found.group()
    if char == "\x00":
        return "contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it"
    return (
        f"contains a lone surrogate (\\u{ord(char):04x}), which is not valid Unicode; "
        "encode the text as UTF-8 or escape whole surrogate pairs"
    )
