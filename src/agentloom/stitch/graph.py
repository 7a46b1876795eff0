"""Checks a React Flow graph once, when a flow is saved, and works out how it runs.

Fan-out scopes: the nodes after a Splitter run once per array element, on their own path,
until a Collector closes that Splitter's scope. Each node's *scope* is the stack of Splitters
whose paths it runs on, so a node at scope ``(s1, s2)`` runs at paths ``[i, j]``. Instance
keys follow the ``nodeId_0`` convention (``nodeId_0_1`` when nested); node states also store
``node_id`` and ``path``, so the engine never parses a key.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeGuard
from urllib.parse import urlsplit

from agentloom.stitch.ids import node_id_problem, shown
from agentloom.stitch.models import HTTP_URL_PATTERN, Graph, NodeType, StitchNode
from agentloom.stitch.webhooks import WebhookPolicy

# Rules a saved graph must keep that JSON Schema cannot say (they relate nodes to each other,
# or depend on the server's webhook policy). The others are in the API's schema as well
# (``models.py``); either way a broken rule is a 422 naming it.
BEYOND_SCHEMA = frozenset(
    {
        "unique_node_id",
        "unique_edge_id",
        "dangling_edge",
        "cycle",
        "fan_out_join",
        "collector_without_splitter",
        "fan_out_id_clash",
        "webhook_target",
    }
)

Problem = tuple[str, str]  # (rule, message)
HTTP_URL = re.compile(HTTP_URL_PATTERN)  # what the schema says of a Worker's data.webhookUrl


class GraphError(ValueError):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(message for _, message in problems))
        self.rules = [rule for rule, _ in problems]
        self.problems = [message for _, message in problems]


def instance_key(node_id: str, path: tuple[int, ...] | list[int]) -> str:
    return node_id if not path else node_id + "".join(f"_{i}" for i in path)


@dataclass(frozen=True)
class RetryPolicy:
    """A Worker's ``data.retry``: up to ``max_attempts`` attempts per budget (a manual retry
    starts a new one), the n-th failure waiting ``backoff_seconds * backoff_factor**(n-1)``."""

    max_attempts: int
    backoff_seconds: float = 1.0
    backoff_factor: float = 2.0

    def delay(self, failures: int) -> float:
        return float(self.backoff_seconds * self.backoff_factor ** (failures - 1))


RETRY_KEYS = {"maxAttempts", "backoffSeconds", "backoffFactor"}


@dataclass(frozen=True)
class Plan:
    nodes: dict[str, StitchNode]
    upstream: dict[str, list[str]]  # in edge order: it decides the input merge order
    downstream: dict[str, list[str]]
    scope: dict[str, tuple[str, ...]]
    closes: dict[str, str]  # Collector -> the Splitter whose paths it gathers
    inside: dict[str, frozenset[str]] = field(default_factory=dict)  # Collector -> nodes on its paths
    roots: list[str] = field(default_factory=list)
    retries: dict[str, RetryPolicy] = field(default_factory=dict)  # Worker -> its data.retry
    timeouts: dict[str, float] = field(default_factory=dict)  # Worker -> its data.timeoutSeconds

    def kind(self, node_id: str) -> NodeType:
        return self.nodes[node_id].type

    def collectors_of(self, splitter: str) -> list[str]:
        return [c for c, s in self.closes.items() if s == splitter]

    def collectors_over(self, node_id: str) -> list[str]:
        """Collectors whose paths run through ``node_id``."""
        return [c for c, members in self.inside.items() if node_id in members]

    @cached_property
    def gathers(self) -> dict[str, tuple[str, ...]]:
        """Node -> the Collectors that gather its output path by path (an upstream Splitter's
        element is read from the Splitter, not counted as an input)."""
        found: dict[str, list[str]] = {}
        for collector in self.closes:
            for source in self.upstream[collector]:
                if self.kind(source) is not NodeType.SPLITTER:
                    found.setdefault(source, []).append(collector)
        return {node_id: tuple(collectors) for node_id, collectors in found.items()}

    def inputs(self, collector: str) -> int:
        """How many inputs a Collector takes on each path it gathers."""
        return sum(1 for source in self.upstream[collector] if collector in self.gathers.get(source, ()))


def analyse(graph: Graph, webhooks: WebhookPolicy | None = None) -> Plan:
    """Validate and plan; every problem found is reported at once, each naming the node or edge.

    ``webhooks`` (the policy) is given when a flow is saved: the node id alphabet and the
    webhook targets are checked then, not when a stored flow is planned again, so a flow
    saved under older rules still runs (its webhooks are still checked when sent).
    """
    problems: list[Problem] = []
    nodes: dict[str, StitchNode] = {}
    for node in graph.nodes:
        if node.id in nodes:
            problems.append(("unique_node_id", f"node id {node.id!r} is used twice; node ids must be unique"))
        nodes[node.id] = node
        problems.extend(_config_problems(node))
        if webhooks is not None:
            problems.extend(_saving_problems(node, webhooks))
    if not graph.nodes:
        problems.append(("nodes_empty", "graph.nodes is empty; a flow needs at least one node"))
    upstream: dict[str, list[str]] = {n: [] for n in nodes}
    downstream: dict[str, list[str]] = {n: [] for n in nodes}
    edge_ids: set[str] = set()
    for edge in graph.edges:
        if edge.id in edge_ids:
            problems.append(("unique_edge_id", f"edge id {edge.id!r} is used twice"))
        edge_ids.add(edge.id)
        missing = [end for end in (edge.source, edge.target) if end not in nodes]
        if missing:
            problems.append(
                ("dangling_edge", f"edge {edge.id!r} points to missing node {missing[0]!r} (dangling edge)")
            )
            continue
        if edge.target in downstream[edge.source]:
            continue  # a second edge between the same nodes adds nothing
        downstream[edge.source].append(edge.target)
        upstream[edge.target].append(edge.source)
    if problems:
        raise GraphError(problems)

    order = _topological(nodes, upstream, downstream)
    scope: dict[str, tuple[str, ...]] = {}
    closes: dict[str, str] = {}
    for node_id in order:
        outer = {_scope_after(u, nodes, scope) for u in upstream[node_id]}
        if len(outer) > 1:
            problems.append(
                (
                    "fan_out_join",
                    f"node {node_id!r} joins paths of different fan-outs ({', '.join(sorted(upstream[node_id]))}); "
                    "close each Splitter with a Collector before joining",
                )
            )
            scope[node_id] = ()
            continue
        incoming = outer.pop() if outer else ()
        if nodes[node_id].type is NodeType.COLLECTOR:
            if not incoming:
                problems.append(
                    ("collector_without_splitter", f"Collector {node_id!r} has no Splitter upstream to collect from")
                )
                scope[node_id] = ()
                continue
            closes[node_id] = incoming[-1]
            incoming = incoming[:-1]
        scope[node_id] = incoming
    problems.extend(_key_collisions(nodes, scope))
    if problems:
        raise GraphError(problems)
    inside = {c: frozenset(_between(s, c, upstream)) for c, s in closes.items()}
    roots = [n for n in order if not upstream[n]]
    retries, timeouts = {}, {}
    for node_id, node in nodes.items():
        if node.type is NodeType.WORKER:
            # Flows saved before these keys were checked still plan: what is unusable is ignored.
            if not _retry_problems(node.id, node.data.get("retry")) and node.data.get("retry") is not None:
                policy = node.data["retry"]
                retries[node_id] = RetryPolicy(
                    int(policy["maxAttempts"]), policy.get("backoffSeconds", 1.0), policy.get("backoffFactor", 2.0)
                )
            if node.data.get("timeoutSeconds") is not None and not _timeout_problem(
                node.id, node.data["timeoutSeconds"]
            ):
                timeouts[node_id] = float(node.data["timeoutSeconds"])
    return Plan(nodes, upstream, downstream, scope, closes, inside, roots, retries, timeouts)


def _scope_after(node_id: str, nodes: dict[str, StitchNode], scope: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The scope a node's successors run in."""
    inner = scope.get(node_id, ())
    return (*inner, node_id) if nodes[node_id].type is NodeType.SPLITTER else inner


def _topological(
    nodes: dict[str, StitchNode], upstream: dict[str, list[str]], downstream: dict[str, list[str]]
) -> list[str]:
    indegree = {n: len(upstream[n]) for n in nodes}
    ready = deque(n for n in nodes if indegree[n] == 0)
    order = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for target in downstream[node]:
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    if len(order) != len(nodes):
        cycle = sorted(n for n in nodes if indegree[n] > 0)
        raise GraphError(
            [("cycle", f"the graph has a cycle through {', '.join(map(repr, cycle))}; flows must be acyclic")]
        )
    return order


def _between(splitter: str, collector: str, upstream: dict[str, list[str]]) -> set[str]:
    """Nodes on the paths from ``splitter`` to ``collector`` (both excluded)."""
    found: set[str] = set()
    stack = [u for u in upstream[collector] if u != splitter]
    while stack:
        node = stack.pop()
        if node in found or node == splitter:
            continue
        found.add(node)
        stack.extend(upstream[node])
    return found


def _config_problems(node: StitchNode) -> list[Problem]:
    data = node.data
    if node.type is NodeType.WORKER:
        url = data.get("webhookUrl")
        if not _is_http_url(url):
            # A URL of the schema's shape that still does not parse (an unclosed '[' in the host) is
            # past what the schema's pattern says.
            rule = "webhook_target" if isinstance(url, str) and HTTP_URL.match(url) else "worker_webhook"
            return [(rule, f"Worker {node.id!r} needs data.webhookUrl, an http(s) URL (got {shown(url)})")]
    if node.type is NodeType.SPLITTER:
        path = data.get("arrayPath")
        if path is not None and not isinstance(path, str):
            return [
                (
                    "splitter_array_path",
                    f"Splitter {node.id!r}: data.arrayPath must be a dotted path such as 'items' (got {path!r})",
                )
            ]
    return []


def _is_http_url(url: object) -> bool:
    try:
        return isinstance(url, str) and urlsplit(url).scheme in ("http", "https") and bool(urlsplit(url).netloc)
    except ValueError:  # such as an unclosed '[' in the host
        return False


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _timeout_problem(node_id: str, value: object) -> str | None:
    if _number(value) and value > 0:
        return None
    return (
        f"Worker {shown(node_id)}: data.timeoutSeconds must be a positive number of seconds such as 30 "
        f"(got {shown(value)})"
    )


def _retry_problems(node_id: str, policy: object) -> list[str]:
    if policy is None:
        return []
    where = f"Worker {shown(node_id)}: data.retry"
    if not isinstance(policy, dict):
        example = '{"maxAttempts": 3, "backoffSeconds": 1, "backoffFactor": 2}'
        return [f"{where} must be an object such as {example} (got {shown(policy)})"]
    problems = []
    unknown = sorted(set(policy) - RETRY_KEYS)
    if unknown:
        problems.append(
            f"{where} has unknown keys {', '.join(map(repr, unknown))}; it takes {', '.join(sorted(RETRY_KEYS))}"
        )
    attempts = policy.get("maxAttempts")
    # A whole number, as JSON Schema's "integer" means it: 3 and 3.0 alike.
    if not (_number(attempts) and float(attempts).is_integer() and attempts >= 1):
        problems.append(
            f"{where}.maxAttempts must be a whole number >= 1, the attempts before the node fails "
            f"(got {shown(attempts)})"
        )
    seconds = policy.get("backoffSeconds", 1.0)
    if not (_number(seconds) and seconds >= 0):
        problems.append(
            f"{where}.backoffSeconds must be a number >= 0, the wait before the first retry (got {shown(seconds)})"
        )
    factor = policy.get("backoffFactor", 2.0)
    if not (_number(factor) and factor >= 1):
        problems.append(f"{where}.backoffFactor must be a number >= 1, by which each wait grows (got {shown(factor)})")
    return problems


def _saving_problems(node: StitchNode, webhooks: WebhookPolicy) -> list[Problem]:
    problems: list[Problem] = []
    problem = node_id_problem(node.id)
    if problem:
        problems.append(("node_id", problem))
    for name in ("timeoutSeconds", "retry"):
        if node.type is not NodeType.WORKER and name in node.data:
            problems.append(
                (
                    "worker_only",
                    f"{node.type} node {shown(node.id)}: data.{name} applies to Worker nodes only; remove it",
                )
            )
    if node.type is NodeType.WORKER:
        if "timeoutSeconds" in node.data:
            problem = _timeout_problem(node.id, node.data["timeoutSeconds"])
            if problem:
                problems.append(("worker_timeout", problem))
        problems.extend(("worker_retry", p) for p in _retry_problems(node.id, node.data.get("retry")))
    url = node.data.get("webhookUrl")
    if node.type is NodeType.WORKER and _is_http_url(url):
        problem = webhooks.url_problem(url)
        if problem:
            problems.append(("webhook_target", f"Worker {shown(node.id)}: data.webhookUrl {problem}"))
    return problems


_SUFFIX = re.compile(r"(_\d+)+")


def _key_collisions(nodes: dict[str, StitchNode], scope: dict[str, tuple[str, ...]]) -> list[Problem]:
    problems: list[Problem] = []
    for node_id, stack in scope.items():
        if not stack:
            continue
        for other in nodes:
            if other.startswith(node_id + "_") and _SUFFIX.fullmatch(other[len(node_id) :]):
                problems.append(
                    (
                        "fan_out_id_clash",
                        f"node id {other!r} would clash with the fan-out paths of {node_id!r} "
                        f"({node_id}_0, {node_id}_1, ...); rename one of them",
                    )
                )
    return problems
