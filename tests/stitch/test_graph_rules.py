"""Each graph rule, word for word, with the rule name the API's 422 carries; and the plan's
parts the engine reads (edges in order, retry policies, deadlines, fan-out membership)."""

from __future__ import annotations

from typing import Any

import pytest

from agentloom.stitch.graph import GraphError, RetryPolicy, analyse
from agentloom.stitch.models import Graph, NodeType
from agentloom.stitch.webhooks import WebhookPolicy

W = "http://127.0.0.1:9/w"
NO_SPLITTER = "; put a Splitter before the nodes it gathers, or delete it"  # the fix a lone Collector's message names


def worker(node_id: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "Worker", "data": {"webhookUrl": W, **data}}


def node(node_id: str, type_: str, **data: Any) -> dict[str, Any]:
    return {"id": node_id, "type": type_, "data": data}


def graph(nodes: list[dict[str, Any]], *edges: tuple[str, str]) -> Graph:
    return Graph.model_validate(
        {"nodes": nodes, "edges": [{"id": f"e{i}", "source": s, "target": t} for i, (s, t) in enumerate(edges)]}
    )


def problems(g: Graph, policy: WebhookPolicy | None = None) -> list[tuple[str, str]]:
    with pytest.raises(GraphError) as caught:
        analyse(g, policy)
    assert str(caught.value) == "; ".join(caught.value.problems)
    return list(zip(caught.value.rules, caught.value.problems, strict=True))


def located(g: Graph, policy: WebhookPolicy | None = None) -> list[tuple[str, str | None, str | None, str | None]]:
    with pytest.raises(GraphError) as caught:
        analyse(g, policy)
    return [(p.rule, p.node_id, p.edge_id, p.field) for p in caught.value.found]


def test_a_cycle_names_its_nodes() -> None:
    assert problems(graph([worker("a"), worker("b"), worker("c")], ("a", "b"), ("b", "c"), ("c", "b"))) == [
        (
            "cycle",
            "node 'b' is on a cycle of 2 node(s) through 'b', 'c'; flows must be acyclic: "
            "remove one of the cycle's edges",
        ),
    ]
    # Three cycles, a node between them and one after them: one problem per cycle, at its first node.
    g = graph(
        [worker("x"), worker("y"), worker("between"), worker("p"), worker("q"), worker("after"), worker("self")],
        ("x", "y"),
        ("y", "x"),
        ("y", "between"),
        ("between", "p"),
        ("p", "q"),
        ("q", "p"),
        ("q", "after"),
        ("self", "self"),
    )
    assert located(g) == [
        ("cycle", "x", None, None),
        ("cycle", "p", None, None),
        ("cycle", "self", None, None),
    ]
    assert "of 2 node(s) through 'p', 'q';" in problems(g)[1][1]


def test_every_problem_is_placed_at_its_node_or_edge_and_field() -> None:
    g = graph(
        [
            {"id": "w", "type": "Worker", "data": {"webhookUrl": ""}},
            worker("t", timeoutSeconds=0, retry={"maxAttempts": 0}),
            node("u", "UX", retry=1, inputSchema={"type": "array"}),
            node("s", "Splitter", arrayPath=3),
            worker("bad id"),
            worker("w"),
        ],
        ("w", "t"),
        ("t", "nowhere"),
    )
    g.edges[1].id = "e0"
    assert located(g, WebhookPolicy()) == [
        ("worker_webhook", "w", None, "webhookUrl"),
        ("worker_timeout", "t", None, "timeoutSeconds"),
        ("worker_retry", "t", None, "retry"),
        ("worker_only", "u", None, "retry"),
        ("input_schema", "u", None, "inputSchema"),
        ("splitter_array_path", "s", None, "arrayPath"),
        ("node_id", "bad id", None, "id"),
        ("unique_node_id", "w", None, "id"),
        ("unique_edge_id", None, "e0", "id"),
        ("dangling_edge", None, "e0", "target"),
    ]


def test_a_draft_hears_of_every_problem_at_once() -> None:
    # A configuration problem no longer hides the structure's: the cycle is named beside the webhook.
    g = graph([{"id": "a", "type": "Worker", "data": {}}, worker("b")], ("a", "b"), ("b", "a"))
    assert [rule for rule, *_ in located(g)] == ["worker_webhook", "cycle"]
    g = graph(
        [node("s", "Splitter"), worker("w"), node("c", "Collector"), worker("w_1", timeoutSeconds=-1)],
        ("s", "w"),
        ("w", "c"),
        ("c", "w_1"),
    )
    assert [rule for rule, *_ in located(g, WebhookPolicy())] == ["worker_timeout", "fan_out_id_clash"]


def test_structure_rules() -> None:
    g = graph([worker("w"), node("w", "UX"), worker("x")], ("w", "x"), ("w", "nope"))
    g.edges[1].id = "e0"
    assert problems(g) == [
        ("unique_node_id", "node id 'w' is used twice; node ids must be unique"),
        ("unique_edge_id", "edge id 'e0' is used twice; give each edge an id of its own"),
        (
            "dangling_edge",
            "edge 'e0' points to missing node 'nope' (dangling edge); connect it to a node of the flow, or delete it",
        ),
    ]
    assert problems(graph([])) == [("nodes_empty", "graph.nodes is empty; a flow needs at least one node")]
    assert problems(graph([worker("a"), node("c", "Collector")], ("a", "c"))) == [
        (
            "collector_without_splitter",
            "Collector 'c' has no Splitter upstream to collect from" + NO_SPLITTER,
        )
    ]
    assert problems(
        graph(
            [node("s", "Splitter", arrayPath="items"), worker("in"), worker("out"), worker("j")],
            ("s", "in"),
            ("in", "j"),
            ("out", "j"),
        )
    ) == [
        (
            "fan_out_join",
            "node 'j' joins paths of different fan-outs (in, out); close each Splitter with a Collector before joining",
        )
    ]


def test_node_configuration_rules() -> None:
    assert problems(graph([{"id": "w", "type": "Worker", "data": {}}])) == [
        ("worker_webhook", "Worker 'w' needs data.webhookUrl, the http(s) URL of its worker (it has none)")
    ]
    assert problems(graph([worker("w", webhookUrl="http://[::1/x")])) == [  # the schema's shape, yet no URL
        ("webhook_target", "Worker 'w' needs data.webhookUrl, the http(s) URL of its worker (got 'http://[::1/x')")
    ]
    assert problems(graph([worker("w", webhookUrl="ftp://x/y")]))[0][0] == "worker_webhook"
    assert problems(graph([node("s", "Splitter", arrayPath=3)])) == [
        ("splitter_array_path", "Splitter 's': data.arrayPath must be a dotted path such as 'items' (got 3)")
    ]


def test_rules_checked_when_a_flow_is_saved() -> None:
    g = graph(
        [
            worker(
                "w", timeoutSeconds=0, retry={"maxAttempts": 0, "backoffSeconds": -1, "backoffFactor": 0.5, "extra": 1}
            ),
            node("u", "UX", timeoutSeconds=3, retry={}),
            worker("bad id", webhookUrl="http://169.254.169.254/x"),
            worker("r", retry="often"),
            worker("t", timeoutSeconds=True, retry={"maxAttempts": 2.5}),
        ]
    )
    assert problems(g, WebhookPolicy()) == [
        ("worker_timeout", "Worker 'w': data.timeoutSeconds must be a positive number of seconds such as 30 (got 0)"),
        (
            "worker_retry",
            "Worker 'w': data.retry has unknown keys 'extra'; it takes backoffFactor, backoffSeconds, maxAttempts",
        ),
        (
            "worker_retry",
            "Worker 'w': data.retry.maxAttempts must be a whole number >= 1, the attempts before the node fails "
            "(got 0)",
        ),
        (
            "worker_retry",
            "Worker 'w': data.retry.backoffSeconds must be a number >= 0, the wait before the first retry (got -1)",
        ),
        (
            "worker_retry",
            "Worker 'w': data.retry.backoffFactor must be a number >= 1, by which each wait grows (got 0.5)",
        ),
        ("worker_only", "UX node 'u': data.timeoutSeconds applies to Worker nodes only; remove it"),
        ("worker_only", "UX node 'u': data.retry applies to Worker nodes only; remove it"),
        (
            "node_id",
            "node id 'bad id' may contain only letters, digits, '_', '-', '.' and ':' "
            "(it is a segment of the callback URL)",
        ),
        (
            "webhook_target",
            "Worker 'bad id': data.webhookUrl points to 169.254.169.254, a cloud metadata address; "
            "allow it with STITCH_WEBHOOK_ALLOW if that is intended",
        ),
        (
            "worker_retry",
            "Worker 'r': data.retry must be an object such as "
            '{"maxAttempts": 3, "backoffSeconds": 1, "backoffFactor": 2} (got \'often\')',
        ),
        (
            "worker_timeout",
            "Worker 't': data.timeoutSeconds must be a positive number of seconds such as 30 (got True)",
        ),
        (
            "worker_retry",
            "Worker 't': data.retry.maxAttempts must be a whole number >= 1, the attempts before the node fails "
            "(got 2.5)",
        ),
    ]
    # A stored flow is planned again without the policy: what it cannot use is ignored, not refused.
    plan = analyse(g.model_copy(update={"nodes": [n for n in g.nodes if n.id in ("w", "r", "t")]}))
    assert plan.retries == {} and plan.timeouts == {}


def test_boundaries_that_are_accepted() -> None:
    plan = analyse(
        graph(
            [
                worker("w", timeoutSeconds=2.5, retry={"maxAttempts": 3.0}),
                worker("v", timeoutSeconds=1, retry={"maxAttempts": 1, "backoffSeconds": 0, "backoffFactor": 1}),
                node("u", "UX"),
            ]
        ),
        WebhookPolicy(),
    )
    assert plan.retries == {"w": RetryPolicy(3, 1.0, 2.0), "v": RetryPolicy(1, 0, 1)}
    assert isinstance(plan.retries["w"].max_attempts, int)
    assert plan.timeouts == {"w": 2.5, "v": 1.0}


def test_retry_delays_grow_by_the_factor() -> None:
    policy = RetryPolicy(5, backoff_seconds=0.5, backoff_factor=3)
    assert [policy.delay(n) for n in (1, 2, 3)] == [0.5, 1.5, 4.5]
    assert RetryPolicy(2).delay(1) == 1.0 and RetryPolicy(2).delay(3) == 4.0


def test_the_plan_keeps_edges_in_order_once() -> None:
    plan = analyse(
        graph(
            [worker("a"), worker("b"), worker("c"), worker("d")],
            ("b", "d"),
            ("a", "d"),
            ("a", "d"),
            ("c", "d"),
            ("a", "b"),
        )
    )
    assert plan.upstream == {"a": [], "b": ["a"], "c": [], "d": ["b", "a", "c"]}
    assert plan.downstream == {"a": ["d", "b"], "b": ["d"], "c": ["d"], "d": []}
    assert plan.roots == ["a", "c"]
    assert plan.kind("a") is NodeType.WORKER


def test_fan_out_membership() -> None:
    # s -> (x -> y, z) -> c, with a Worker after c: x, y and z run per path; c closes s.
    plan = analyse(
        graph(
            [
                node("s", "Splitter", arrayPath="items"),
                worker("x"),
                worker("y"),
                worker("z"),
                node("c", "Collector"),
                worker("after"),
            ],
            ("s", "x"),
            ("x", "y"),
            ("s", "z"),
            ("y", "c"),
            ("z", "c"),
            ("c", "after"),
        )
    )
    assert plan.closes == {"c": "s"}
    assert plan.inside == {"c": frozenset({"x", "y", "z"})}
    assert plan.collectors_of("s") == ["c"] and plan.collectors_of("x") == []
    assert (
        plan.collectors_over("y") == ["c"] and plan.collectors_over("after") == [] and plan.collectors_over("s") == []
    )
    assert plan.scope == {"s": (), "x": ("s",), "z": ("s",), "y": ("s",), "c": (), "after": ()}


def test_https_webhooks_are_accepted_like_http_ones() -> None:
    g = graph(
        [worker("w", webhookUrl="https://example.com/hook"), worker("v", webhookUrl="HTTPS://example.com/v")],
        ("w", "v"),
    )
    assert analyse(g).roots == ["w"]
    assert analyse(g, WebhookPolicy()).roots == ["w"]


def test_unknown_retry_keys_are_all_named_in_order() -> None:
    assert problems(graph([worker("w", retry={"maxAttempts": 1, "zeta": 1, "alpha": 2})]), WebhookPolicy()) == [
        (
            "worker_retry",
            "Worker 'w': data.retry has unknown keys 'alpha', 'zeta'; "
            "it takes backoffFactor, backoffSeconds, maxAttempts",
        )
    ]


def test_only_a_worker_s_http_webhook_is_checked_against_the_policy() -> None:
    # A URL in another node's data is no webhook: the policy does not judge it.
    plan = analyse(
        graph([node("u", "UX", webhookUrl="http://169.254.169.254/x"), worker("w")], ("u", "w")), WebhookPolicy()
    )
    assert plan.roots == ["u"]
    # A Worker's URL that is no http(s) URL is reported once, by the configuration rule.
    assert problems(graph([worker("w", webhookUrl="ftp://x/y")]), WebhookPolicy()) == [
        ("worker_webhook", "Worker 'w' needs data.webhookUrl, the http(s) URL of its worker (got 'ftp://x/y')")
    ]


def test_a_fan_out_id_clash_is_named_and_other_underscored_ids_are_fine() -> None:
    assert problems(
        graph(
            [node("s", "Splitter"), worker("w"), node("c", "Collector"), worker("w_1")],
            ("s", "w"),
            ("w", "c"),
            ("c", "w_1"),
        )
    ) == [
        (
            "fan_out_id_clash",
            "node id 'w_1' would clash with the fan-out paths of 'w' (w_0, w_1, ...); rename one of them",
        )
    ]
    # 'w_x' starts like w's path keys but is not one; 'ab_1' ends like one but belongs to no fan-out node.
    plan = analyse(
        graph(
            [node("s", "Splitter"), worker("w"), node("c", "Collector"), worker("w_x"), worker("ab_1")],
            ("s", "w"),
            ("w", "c"),
            ("c", "w_x"),
            ("w_x", "ab_1"),
        )
    )
    assert plan.scope == {"s": (), "w": ("s",), "c": (), "w_x": (), "ab_1": ()}


def test_a_bad_join_is_reported_once_and_later_nodes_are_still_checked() -> None:
    # j joins a fan-out path with a node outside it; k, after j, joins a plain root (fine);
    # the Collector after k has no Splitter upstream (j's fan-out is not carried past the bad join).
    assert problems(
        graph(
            [
                node("s", "Splitter"),
                worker("in"),
                worker("out"),
                worker("j"),
                worker("r"),
                worker("k"),
                node("c", "Collector"),
            ],
            ("s", "in"),
            ("in", "j"),
            ("out", "j"),
            ("j", "k"),
            ("r", "k"),
            ("k", "c"),
        )
    ) == [
        (
            "fan_out_join",
            "node 'j' joins paths of different fan-outs (in, out); close each Splitter with a Collector before joining",
        ),
        (
            "collector_without_splitter",
            "Collector 'c' has no Splitter upstream to collect from" + NO_SPLITTER,
        ),
    ]


def test_a_collector_without_splitter_is_reported_once_and_later_nodes_are_still_checked() -> None:
    assert problems(
        graph(
            [worker("a"), node("c1", "Collector"), worker("r"), worker("k"), node("c2", "Collector")],
            ("a", "c1"),
            ("c1", "k"),
            ("r", "k"),
            ("k", "c2"),
        )
    ) == [
        (
            "collector_without_splitter",
            "Collector 'c1' has no Splitter upstream to collect from" + NO_SPLITTER,
        ),
        (
            "collector_without_splitter",
            "Collector 'c2' has no Splitter upstream to collect from" + NO_SPLITTER,
        ),
    ]
