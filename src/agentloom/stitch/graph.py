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
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from agentloom.stitch import bounded_schemas, input_schemas
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
        "fan_out_depth",
        "webhook_target",
        "input_schema",  # a JSON Schema's own rules (its meta-schema) are past what the API's schema says
    }
)
HTTP_URL = re.compile(HTTP_URL_PATTERN)  # what the schema says of a Worker's data.webhookUrl
_LAST_INDEX = re.compile(r"_\d+$")  # the last path index of an instance key
MAX_FAN_OUT_DEPTH = 16  # Splitters a node may run inside (each path key grows by one index per level)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a graph (or worth a warning), and where: the node or edge it concerns
    and the field of it (a key of the node's ``data`` such as ``webhookUrl``, or the node's or
    edge's own key such as ``type`` or ``source``). ``loc`` is the JSON path inside the graph,
    when the problem is one value's (the API's 422 names it)."""

    rule: str
    message: str
    node_id: str | None = None
    edge_id: str | None = None
    field: str | None = None
    loc: tuple[str | int, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "message": self.message,
            "node_id": self.node_id,
            "edge_id": self.edge_id,
            "field": self.field,
        }


class GraphError(ValueError):
    """The graph breaks rules; ``found`` has every problem, ``rules`` and ``problems`` their rule
    names and messages."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.found = list(problems)
        self.rules = [p.rule for p in problems]
        self.problems = [p.message for p in problems]


@dataclass(frozen=True)
class Review:
    """What :func:`review` found: the plan (None when the graph cannot be planned), the problems
    that keep it from being saved, and warnings that do not."""

    plan: Plan | None
    problems: list[Problem]
    warnings: list[Problem]


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
    # UX node -> its data.inputSchema, which a completion must fit (only a usable schema: a flow
    # saved before schemas were checked may hold anything there, and runs as before).
    gate_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    input_schema: dict[str, Any] | None = None  # the graph's inputSchema: what a run's input must fit

    def kind(self, node_id: str) -> NodeType:
        return self.nodes[node_id].type

    def node_of(self, key: str) -> str | None:
        """The node whose instance ``key`` is (``gate`` for ``gate`` and ``gate_0_1``), or None."""
        if key in self.nodes:
            return key
        base = key
        for depth in range(1, self.deepest + 1):
            index = _LAST_INDEX.search(base)
            if index is None:
                return None
            base = base[: index.start()]
            if base in self.nodes and len(self.scope.get(base, ())) == depth:
                return base
        return None

    @cached_property
    def deepest(self) -> int:
        """How many Splitters the most nested node runs inside."""
        return max((len(stack) for stack in self.scope.values()), default=0)

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
    """Validate and plan; every problem found is reported at once (:class:`GraphError`), each
    naming the node or edge.

    ``webhooks`` (the policy) is given when a flow is saved: the node id alphabet, the webhook
    targets and the input schemas are checked then, not when a stored flow is planned again, so
    a flow saved under older rules still runs (its webhooks are still checked when sent).
    """
    found = review(graph, webhooks)
    if found.problems or found.plan is None:
        raise GraphError(found.problems)
    return found.plan


def review(graph: Graph, webhooks: WebhookPolicy | None = None) -> Review:
    """Every problem and warning of the graph at once, and its plan when it has no problem that
    keeps it from being planned (a cycle). A node's configuration, duplicate ids and edges that
    lead nowhere do not stop the checks that follow: a draft hears of all its problems."""
    problems: list[Problem] = []
    nodes: dict[str, StitchNode] = {}
    gate_schemas: dict[str, dict[str, Any]] = {}
    in_all = _schema_bytes(graph)
    schemas_fit = in_all <= bounded_schemas.MAX_GRAPH_BYTES  # when not, none is checked, nor used
    spent = _Expansion()
    if not schemas_fit and webhooks is not None:
        problems.append(
            Problem(
                "input_schema",
                f"the flow's input schemas hold {in_all:,} bytes of JSON in all; a flow's may hold at most "
                f"{bounded_schemas.MAX_GRAPH_BYTES:,}: share definitions, or ask for less in each form",
            )
        )
    for node in graph.nodes:
        if node.id in nodes:
            problems.append(
                Problem(
                    "unique_node_id",
                    f"node id {node.id!r} is used twice; node ids must be unique",
                    node_id=node.id,
                    field="id",
                )
            )
        nodes[node.id] = node
        problems.extend(_config_problems(node))
        gate_problem = _gate_schema(node, gate_schemas, spent) if schemas_fit else None
        if webhooks is not None:
            problems.extend(_saving_problems(node, webhooks))
            if gate_problem is not None:
                problems.append(gate_problem)
    input_schema, input_problem = _flow_input_schema(graph, spent) if schemas_fit else (None, None)
    if webhooks is not None and input_problem is not None:
        problems.append(input_problem)
    if not graph.nodes:
        problems.append(Problem("nodes_empty", "graph.nodes is empty; a flow needs at least one node", field="nodes"))
    upstream: dict[str, list[str]] = {n: [] for n in nodes}
    downstream: dict[str, list[str]] = {n: [] for n in nodes}
    edge_ids: set[str] = set()
    for edge in graph.edges:
        if edge.id in edge_ids:
            problems.append(
                Problem(
                    "unique_edge_id",
                    f"edge id {shown(edge.id)} is used twice; give each edge an id of its own",
                    edge_id=edge.id,
                    field="id",
                )
            )
        edge_ids.add(edge.id)
        missing = [(end, name) for end, name in ((edge.source, "source"), (edge.target, "target")) if end not in nodes]
        if missing:
            problems.append(
                Problem(
                    "dangling_edge",
                    f"edge {shown(edge.id)} points to missing node {shown(missing[0][0])} (dangling edge); "
                    "connect it to a node of the flow, or delete it",
                    edge_id=edge.id,
                    field=missing[0][1],
                )
            )
            continue
        if edge.target in downstream[edge.source]:
            continue  # a second edge between the same nodes adds nothing
        downstream[edge.source].append(edge.target)
        upstream[edge.target].append(edge.source)

    order, cyclic = _topological(nodes, upstream, downstream)
    if cyclic:
        problems.extend(_cycle_problems(nodes, cyclic, downstream))
        return Review(None, problems, [])
    scope: dict[str, tuple[str, ...]] = {}
    closes: dict[str, str] = {}
    for node_id in order:
        outer = {_scope_after(u, nodes, scope) for u in upstream[node_id]}
        if len(outer) > 1:
            problems.append(
                Problem(
                    "fan_out_join",
                    f"node {node_id!r} joins paths of different fan-outs ({_some(sorted(upstream[node_id]))}); "
                    "close each Splitter with a Collector before joining",
                    node_id=node_id,
                )
            )
            scope[node_id] = ()
            continue
        incoming = outer.pop() if outer else ()
        if nodes[node_id].type is NodeType.COLLECTOR:
            if not incoming:
                problems.append(
                    Problem(
                        "collector_without_splitter",
                        f"Collector {node_id!r} has no Splitter upstream to collect from; put a Splitter before the "
                        "nodes it gathers, or delete it",
                        node_id=node_id,
                    )
                )
                scope[node_id] = ()
                continue
            closes[node_id] = incoming[-1]
            incoming = incoming[:-1]
        scope[node_id] = incoming
        if len(incoming) > MAX_FAN_OUT_DEPTH:
            problems.append(
                Problem(
                    "fan_out_depth",
                    f"node {node_id!r} runs inside {len(incoming)} nested Splitters; fan-outs nest at most "
                    f"{MAX_FAN_OUT_DEPTH} deep: close some with a Collector first",
                    node_id=node_id,
                )
            )
    if any(p.rule == "fan_out_depth" for p in problems):
        return Review(None, problems, [])
    problems.extend(_key_collisions(nodes, scope))
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
    plan = Plan(
        nodes,
        upstream,
        downstream,
        scope,
        closes,
        inside,
        roots,
        retries,
        timeouts,
        gate_schemas=gate_schemas,
        input_schema=input_schema,
    )
    return Review(plan, problems, _warnings(graph, plan))


def _scope_after(node_id: str, nodes: dict[str, StitchNode], scope: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The scope a node's successors run in."""
    inner = scope.get(node_id, ())
    return (*inner, node_id) if nodes[node_id].type is NodeType.SPLITTER else inner


def _topological(
    nodes: dict[str, StitchNode], upstream: dict[str, list[str]], downstream: dict[str, list[str]]
) -> tuple[list[str], set[str]]:
    """The nodes in an order where each comes after its upstream nodes, and the nodes left out
    because a cycle leads to them (empty when the graph is acyclic)."""
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
    return order, {n for n in nodes if indegree[n] > 0}


def _cycle_problems(nodes: dict[str, StitchNode], left: set[str], downstream: dict[str, list[str]]) -> list[Problem]:
    """One problem per cycle (a strongly connected part of the graph), at its first node in the
    graph's order, naming its length and a few of its nodes. ``left`` also holds the nodes a
    cycle only leads to; those are not on one and are not named."""
    position = {node: i for i, node in enumerate(nodes)}
    problems = []
    for part in _strongly_connected(left, downstream):
        first = part[0]
        if len(part) == 1 and first not in downstream[first]:
            continue  # only led to by a cycle
        members = sorted(part, key=position.__getitem__)
        named = _some([repr(member) for member in members])
        problems.append(
            Problem(
                "cycle",
                f"node {members[0]!r} is on a cycle of {len(members):,} node(s) through {named}; flows must be "
                "acyclic: remove one of the cycle's edges",
                node_id=members[0],
            )
        )
    problems.sort(key=lambda p: position[p.node_id or ""])
    return problems


CYCLE_NAMES = 5  # nodes a cycle's problem names (and a join's, of its upstream nodes)


def _some(ids: list[str]) -> str:
    """The first few of ``ids``, and how many more."""
    named = ", ".join(ids[:CYCLE_NAMES])
    return named if len(ids) <= CYCLE_NAMES else f"{named} and {len(ids) - CYCLE_NAMES:,} more"


def _strongly_connected(among: set[str], downstream: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected parts of the graph restricted to ``among`` (Tarjan's algorithm,
    without recursion: a cycle may be thousands of nodes long)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    parts: list[list[str]] = []
    for root in among:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = downstream[node]
            while child < len(targets) and (targets[child] not in among or targets[child] in index):
                target = targets[child]
                if target in on_stack:
                    low[node] = min(low[node], index[target])
                child += 1
            if child < len(targets):
                work.append((node, child + 1))
                work.append((targets[child], 0))
                continue
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                parts.append(part)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return parts


def _warnings(graph: Graph, plan: Plan) -> list[Problem]:
    """What is allowed but most likely not meant: a Splitter whose paths no Collector gathers
    (each path just ends), a node connected to nothing in a flow of several nodes (it runs on its
    own, at the start, with the run's input), and a node that hears only UX gates' answers while
    what came before the gates goes no further (:func:`_gate_answer_only`)."""
    found = []
    gathered = set(plan.closes.values())
    for node_id, node in plan.nodes.items():
        if node.type is NodeType.SPLITTER and node_id not in gathered:
            found.append(
                Problem(
                    "splitter_without_collector",
                    f"Splitter {node_id!r}: no Collector gathers its paths, so each path ends on its own and "
                    "nothing runs with all the results; add a Collector after the nodes on its paths if the flow "
                    "should go on",
                    node_id=node_id,
                )
            )
        if len(plan.nodes) > 1 and not plan.upstream[node_id] and not plan.downstream[node_id]:
            found.append(
                Problem(
                    "unconnected_node",
                    f"node {node_id!r} is connected to nothing: it runs on its own at the start, with the run's "
                    "input; connect it with an edge, or delete it",
                    node_id=node_id,
                )
            )
    return found + _gate_answer_only(plan)


def _gate_answer_only(plan: Plan) -> list[Problem]:
    """Nodes whose every input edge comes from a UX gate: by the input merge rule they receive the
    person's answers alone, not the outputs the gates were shown (a draft to approve, say). A
    Collector is left out: it gathers what its paths end with, whatever that is."""
    found = []
    for node_id, sources in plan.upstream.items():
        if not sources or plan.kind(node_id) is NodeType.COLLECTOR:
            continue
        if any(plan.kind(source) is not NodeType.UX for source in sources):
            continue
        given = set(sources)
        dropped = list(
            dict.fromkeys(before for gate in sources for before in plan.upstream[gate] if before not in given)
        )
        if not dropped:
            continue
        gates = ("UX gate " if len(sources) == 1 else "UX gates ") + _some([repr(g) for g in sources])
        lost = _some([repr(d) for d in dropped])
        fix = (
            f"an edge from {lost} to {node_id!r}"
            if len(dropped) == 1
            else f"an edge from each of {lost} to {node_id!r}"
        )
        found.append(
            Problem(
                "gate_answer_only",
                f"{plan.kind(node_id).value} {node_id!r} will receive only the answer given at {gates}, not "
                f"the output of {lost} that came before: a node receives the outputs of the nodes with an edge to "
                f"it, and a gate's output is the person's answer. If {node_id!r} needs what {lost} made, add {fix} "
                "too: it then receives both, merged",
                node_id=node_id,
            )
        )
    return found


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
            given = "it has none" if url is None else f"got {shown(url)}"
            message = f"Worker {node.id!r} needs data.webhookUrl, the http(s) URL of its worker ({given})"
            return [Problem(rule, message, node_id=node.id, field="webhookUrl")]
    if node.type is NodeType.SPLITTER:
        path = data.get("arrayPath")
        if path is not None and not isinstance(path, str):
            return [
                Problem(
                    "splitter_array_path",
                    f"Splitter {node.id!r}: data.arrayPath must be a dotted path such as 'items' (got {shown(path)})",
                    node_id=node.id,
                    field="arrayPath",
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

    def found(rule: str, message: str, field: str) -> None:
        problems.append(Problem(rule, message, node_id=node.id, field=field))

    problem = node_id_problem(node.id)
    if problem:
        found("node_id", problem, "id")
    for name in ("timeoutSeconds", "retry"):
        if node.type is not NodeType.WORKER and name in node.data:
            found(
                "worker_only",
                f"{node.type} node {shown(node.id)}: data.{name} applies to Worker nodes only; remove it",
                name,
            )
    if node.type is NodeType.WORKER:
        if "timeoutSeconds" in node.data:
            problem = _timeout_problem(node.id, node.data["timeoutSeconds"])
            if problem:
                found("worker_timeout", problem, "timeoutSeconds")
        for problem in _retry_problems(node.id, node.data.get("retry")):
            found("worker_retry", problem, "retry")
    url = node.data.get("webhookUrl")
    if node.type is NodeType.WORKER and _is_http_url(url):
        problem = webhooks.url_problem(url)
        if problem:
            found("webhook_target", f"Worker {shown(node.id)}: data.webhookUrl {problem}", "webhookUrl")
    return problems


# Each input schema is checked once (checking one is the costly part of a review): the plan keeps
# the usable ones, and saving refuses a graph with the others.
def _gate_schema(node: StitchNode, usable: dict[str, dict[str, Any]], spent: _Expansion) -> Problem | None:
    """A UX node's ``data.inputSchema`` put in ``usable`` by node id, or the problem with it."""
    usable.pop(node.id, None)
    if node.type is not NodeType.UX or "inputSchema" not in node.data:
        return None
    schema = node.data["inputSchema"]
    problem = spent.problem(schema)
    if problem is None:
        usable[node.id] = schema
        return None
    return Problem(
        "input_schema", f"UX node {shown(node.id)}: data.inputSchema {problem}", node_id=node.id, field="inputSchema"
    )


@dataclass
class _Expansion:
    """The subschemas a graph's input schemas expand to, added up: checking each costs that
    much at save (and a graph of a hundred middling schemas costs a hundred times one)."""

    total: int = 0

    def problem(self, schema: Any) -> str | None:
        """Why ``schema`` is not usable (the end of a sentence), or None; once the graph's are
        past the limit, the rest are not checked."""
        if self.total <= bounded_schemas.MAX_GRAPH_EXPANDED:
            found = input_schemas.check(schema)
            if found.problem is not None:
                return found.problem
            self.total += found.expanded
        if self.total > bounded_schemas.MAX_GRAPH_EXPANDED:
            return (
                f"is past what a flow's input schemas may cost in all ({bounded_schemas.MAX_GRAPH_EXPANDED:,} "
                "subschemas, their references followed); share fewer references, or ask for less in each form"
            )
        return None


def _schema_bytes(graph: Graph) -> int:
    """The size of every input schema of the graph as JSON, added up."""
    schemas = [node.data.get("inputSchema") for node in graph.nodes if node.type is NodeType.UX]
    schemas.append((graph.model_extra or {}).get("inputSchema"))
    return sum(bounded_schemas.size(schema) for schema in schemas if isinstance(schema, dict))


def _flow_input_schema(graph: Graph, spent: _Expansion) -> tuple[dict[str, Any] | None, Problem | None]:
    """The graph's ``inputSchema`` when it is usable, or the problem with it."""
    extra = graph.model_extra or {}
    if "inputSchema" not in extra:
        return None, None
    problem = spent.problem(extra["inputSchema"])
    if problem is None:
        return extra["inputSchema"], None
    return None, Problem("input_schema", f"the flow's inputSchema {problem}", field="inputSchema", loc=("inputSchema",))


def _key_collisions(nodes: dict[str, StitchNode], scope: dict[str, tuple[str, ...]]) -> list[Problem]:
    """Node ids that a fan-out node's path keys (``id_0``, ``id_0_1``, ...) would take."""
    scoped = {node_id for node_id, stack in scope.items() if stack}
    problems: list[Problem] = []
    for other in nodes:
        base = other
        while scoped and (suffix := _LAST_INDEX.search(base)) is not None:
            base = base[: suffix.start()]
            if base in scoped:
                problems.append(
                    Problem(
                        "fan_out_id_clash",
                        f"node id {other!r} would clash with the fan-out paths of {base!r} "
                        f"({base}_0, {base}_1, ...); rename one of them",
                        node_id=other,
                        field="id",
                    )
                )
    return problems
