"""What a node receives: the merge of its upstream outputs, and the array a Splitter fans out.

Input merge rule: a node with one upstream receives that node's output unchanged (a path
after a Splitter receives its array element). With several upstreams, object outputs are
merged key by key in edge order (a later edge wins a clash) and any other output is placed
under its upstream node's id. Root nodes receive the run's input.
"""

from __future__ import annotations

from typing import Any


def merge(parts: list[tuple[str, Any]]) -> Any:
    if len(parts) == 1:
        return parts[0][1]
    merged: dict[str, Any] = {}
    for source, value in parts:
        if isinstance(value, dict):
            merged.update(value)
        else:
            merged[source] = value
    return merged


def extract_array(value: Any, array_path: str | None) -> tuple[list[Any], str | None]:
    """The array a Splitter fans out: ``value`` itself, or the dotted ``arrayPath`` inside it."""
    current = value
    for part in (array_path or "").split(".") if array_path else []:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return [], f"data.arrayPath {array_path!r} does not exist in the input (stopped at {part!r})"
    if not isinstance(current, list):
        where = f"data.arrayPath {array_path!r}" if array_path else "the input"
        return [], f"{where} is {type(current).__name__}, not an array"
    return current, None
