"""What a node receives: the merge of its upstream outputs, and the array a Splitter fans out.

Input merge rule: a node with one upstream receives that node's output unchanged (a path
after a Splitter receives its array element). With several upstreams, object outputs are
merged key by key in edge order (a later edge wins a clash) and any other output is placed
under its upstream node's id. Root nodes receive the run's input.
"""

from __future__ import annotations

from typing import Any

from agentloom.stitch.ids import shown


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


MAX_FAN_OUT = 10_000  # paths one Splitter starts: each is a node state, webhook and row of its own


def extract_array(value: Any, array_path: str | None) -> tuple[list[Any], str | None]:
    """The array a Splitter fans out: ``value`` itself, or the dotted ``arrayPath`` inside it."""
    current = value
    where = f"data.arrayPath {shown(array_path)}" if array_path else "the input"
    for part in (array_path or "").split(".") if array_path else []:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isascii() and part.isdigit() and len(part) <= 18:
            if int(part) >= len(current):
                return [], f"{where} does not exist in the input (stopped at {shown(part)})"
            current = current[int(part)]
        else:
            return [], f"{where} does not exist in the input (stopped at {shown(part)})"
    if not isinstance(current, list):
        return [], f"{where} is {type(current).__name__}, not an array"
    if len(current) > MAX_FAN_OUT:
        return [], (
            f"{where} has {len(current):,} elements; a Splitter starts at most {MAX_FAN_OUT:,} paths: "
            "split the array into batches before it"
        )
    return current, None
