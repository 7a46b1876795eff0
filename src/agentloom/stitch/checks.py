"""One rule set for a graph, whether it is saved (POST and PUT /flows) or only checked (POST
/flows/validate): :func:`check` reads the graph as sent (JSON), through the request model
(:class:`~.models.Graph`: node types, ids, positions, edge ends) and then the graph rules
(:func:`.graph.review`, with the server's webhook policy), and reports every problem at once,
each at its node or edge and field. A draft may be very broken: the nodes and edges the model
refuses are left out of the graph rules, and the rest is still checked, so a missing webhook
URL, a dangling edge and an unknown node type are all heard of in one answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agentloom.stitch.graph import Problem, review
from agentloom.stitch.ids import shown
from agentloom.stitch.models import EDGE_ID_MAX, Graph
from agentloom.stitch.webhooks import WebhookPolicy

_KINDS = {"nodes": "node", "edges": "edge"}
# The rule a problem of the request model breaks, by the key it concerns.
_RULES = {
    "node": {"id": "node_id", "type": "node_type", "position": "node_position", "data": "node_data"},
    "edge": {"id": "edge_id", "source": "edge_source", "target": "edge_target"},
}
_MISSING_HINTS = {
    ("node", "id"): "give every node an id of its own",
    ("node", "type"): "set it to Worker, UX, Splitter or Collector",
    ("edge", "id"): "give every edge an id of its own",
    ("edge", "source"): "set it to the id of the node the edge starts at",
    ("edge", "target"): "set it to the id of the node the edge leads to",
}


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` found in a graph; it may be saved when ``problems`` is empty."""

    graph: Any  # as sent: what is saved, unchanged
    problems: list[Problem]
    warnings: list[Problem]

    @property
    def valid(self) -> bool:
        return not self.problems


def check(graph: Any, webhooks: WebhookPolicy) -> Verdict:
    """Every problem and warning of ``graph``, at most :data:`MAX_LISTED` of each (the last one
    listed then says how many more there are)."""
    verdict = _check(graph, webhooks)
    return Verdict(graph, _listed(verdict.problems, "problem"), _listed(verdict.warnings, "warning"))


MAX_LISTED = 100  # problems (and warnings) in one answer: a draft of 5,000 broken nodes gets a bounded reply


def _listed(found: list[Problem], kind: str) -> list[Problem]:
    if len(found) <= MAX_LISTED:
        return found
    rest = len(found) - MAX_LISTED + 1
    rules = sorted({p.rule for p in found[MAX_LISTED - 1 :]})
    more = Problem(
        found[MAX_LISTED - 1].rule if len(rules) == 1 else "more",
        f"... and {rest:,} more {kind}(s) of these rules: {', '.join(rules)}; mend the ones listed and check again",
    )
    return [*found[: MAX_LISTED - 1], more]


def _check(graph: Any, webhooks: WebhookPolicy) -> Verdict:
    try:
        model = Graph.model_validate(graph)
    except ValidationError as exc:
        problems = [_model_problem(graph, error) for error in exc.errors(include_url=False)]
        rest = _checkable_part(graph, problems)
        if rest is None:
            return Verdict(graph, problems, [])
        found = review(rest, webhooks)
        # The nodes left out have problems of their own: none is "missing", and warnings about
        # what they would have connected would be wrong.
        problems += [p for p in found.problems if p.rule != "nodes_empty"]
        return Verdict(graph, problems, [])
    found = review(model, webhooks)
    return Verdict(graph, found.problems, found.warnings)


def _checkable_part(graph: Any, problems: list[Problem]) -> Graph | None:
    """The graph without the nodes and edges the model refused (and the edges to those nodes),
    or None when there is no list of nodes to check."""
    if not isinstance(graph, dict) or any(p.loc in ((), ("nodes",)) for p in problems):
        return None
    bad = {kind: {p.loc[1] for p in problems if len(p.loc) > 1 and p.loc[0] == kind} for kind in _KINDS}
    listed: list[Any] = graph["nodes"]  # a list: the model refused nothing at "nodes" itself
    nodes = [node for i, node in enumerate(listed) if i not in bad["nodes"]]
    left_out = {_own_id(node) for i, node in enumerate(listed) if i in bad["nodes"]} - {None}
    given = graph.get("edges")
    edges = [
        edge
        for i, edge in enumerate(given if isinstance(given, list) else [])
        if i not in bad["edges"] and edge.get("source") not in left_out and edge.get("target") not in left_out
    ]
    try:
        return Graph.model_validate({**graph, "nodes": nodes, "edges": edges})
    except ValidationError:  # not expected: each part passed on its own
        return None


def _own_id(item: Any) -> str | None:
    """The id a node or edge gives itself, when it is one a reply may carry (not too long)."""
    value = item.get("id") if isinstance(item, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= EDGE_ID_MAX else None


def _model_problem(graph: Any, error: ErrorDetails) -> Problem:
    loc = tuple(error["loc"])
    if not loc:
        return Problem(
            "graph",
            f'the graph must be an object such as {{"nodes": [...], "edges": [...]}} (got {_got(error["input"])})',
        )
    where = str(loc[0])
    if where in _KINDS and len(loc) > 1 and isinstance(loc[1], int):
        return _part_problem(graph[where][loc[1]], _KINDS[where], loc, error)
    if error["type"] == "missing":
        message = f'graph.{where} is missing; a flow needs "nodes": [{{"id": ..., "type": ...}}, ...]'
    else:
        message = f"graph.{where} must be an array (got {_got(error['input'])})"
    return Problem(where, message, field=where, loc=loc)


def _part_problem(item: Any, kind: str, loc: tuple[str | int, ...], error: ErrorDetails) -> Problem:
    own_id = _own_id(item)
    where = f"{kind} {own_id!r}" if own_id else f"the {kind} at {loc[0]}[{loc[1]}]"
    located = {"node_id": own_id} if kind == "node" else {"edge_id": own_id}
    rest = [str(part) for part in loc[2:]]
    if not rest:
        example = '{"id": ..., "type": ..., "data": {...}}' if kind == "node" else '{"id": ..., "source": ...}'
        return Problem(kind, f"{where} must be an object such as {example} (got {_got(item)})", loc=loc, **located)
    key = rest[0]
    field = ".".join(rest[1:] if key == "data" and len(rest) > 1 else rest)
    rule = _RULES[kind].get(key, f"{kind}_{key}")
    if error["type"] == "value_error":  # a message of ours, which names the node and the fix
        message = error["msg"].removeprefix("Value error, ")
    elif error["type"] == "missing":
        message = f"{where}: {field} is missing; {_MISSING_HINTS.get((kind, key), 'add it')}"
    else:
        message = f"{where}: {field} {_plain(error['msg'])} (got {_got(error['input'])})"
    return Problem(rule, message, field=field, loc=loc, **located)


def _plain(message: str) -> str:
    """pydantic's wording as part of a sentence about the field."""
    if "valid dictionary" in message:
        return "must be an object"
    for theirs, ours in (("Input should be", "must be"), ("String should", "must"), ("List should", "must")):
        if message.startswith(theirs):
            return ours + message[len(theirs) :]
    return message[:1].lower() + message[1:]


def _got(value: Any) -> str:
    return shown(value, 60)
