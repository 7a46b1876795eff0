"""Plan a chatflow from node names alone: wire every node by type, pick the ending node, lay it out.

The rule. Every node but one feeds another node: one of its output classes (of one chosen output,
for a node with several) meets the classes of an input of that node. The node left over, the ending
node, is a chain, an agent or an engine. Every required input is filled, a non-list input takes one
edge, and the graph has no cycle: a retrieval chain takes a chat model and a vector store, which
takes embeddings and documents, which take a text splitter. Wiring is by type across the whole list,
never by list position.

Among the wirings that obey the rule the planner keeps the best one. Each node gets one "primary"
edge, found by a depth-first search (most constrained node first, best candidate first, branch and
bound on the score, a fixed budget of steps); required inputs still empty afterwards are filled by
fanning out a placed node whose chosen output fits (two vector stores sharing one embeddings node).
A wiring scores lower for:

- a general class: a chat model lists its classes from most to least specific (ChatOpenAI, ...,
  BaseChatModel, BaseLanguageModel, Runnable), so a ``BaseChatModel`` input beats a
  ``BaseLanguageModel`` one, and matching on ``Runnable``/``json``/``string`` costs more;
- a node's non-default output (a vector store's ``vectorStore`` rather than its ``retriever``);
- a variable parameter (``acceptVariable``, such as a prompt's ``promptValues``) used as an input:
  only chained chains need one;
- each required input left to a fan-out, so nodes go where they are needed most.

Ties go to list order, so the plan is deterministic. When no wiring exists the ``PlanError`` names
the missing piece in one short sentence.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentloom.packs.flowise.flowdata import (
    ENDING_CATEGORIES,
    PARAM_TYPES,
    Json,
    connect,
    input_name,
    new_flow,
    type_classes,
)
from agentloom.packs.flowise.layout import layout

GENERIC = frozenset({"Runnable", "json", "string", "BaseDocumentTransformer"})
SEARCH_BUDGET = 20_000  # search steps per ending candidate; the marketplace flows need a few hundred
FANOUT_COST = 300
VARIABLE_COST = 500
KINDS = {
    "Chat Models": "chat model",
    "LLMs": "LLM",
    "Vector Stores": "vector store",
    "Embeddings": "embeddings node",
    "Document Loaders": "document loader",
    "Text Splitters": "text splitter",
    "Memory": "memory node",
    "Tools": "tool",
    "Prompts": "prompt",
    "Retrievers": "retriever",
    "Chains": "chain",
    "Agents": "agent",
    "Engine": "engine",
    "Output Parsers": "output parser",
    "Moderation": "moderation node",
    "Cache": "cache",
}
FAMILIAR = (
    "chatOpenAI",
    "bufferMemory",
    "faiss",
    "openAIEmbeddings",
    "recursiveCharacterTextSplitter",
    "textFile",
    "promptTemplate",
    "chatPromptTemplate",
    "calculator",
    "conversationChain",
    "llmChain",
    "toolAgent",
    "conversationalRetrievalQAChain",
    "inputModerationOpenAI",
    "queryEngine",
    "retrieverTool",
)


class PlanError(ValueError):
    """No chatflow can be wired from the given names; the message names the missing piece (< 50 tokens)."""


@dataclass(frozen=True)
class _Output:
    name: str | None  # the option of a node with several outputs; None for a single output
    classes: tuple[str, ...]  # most specific first
    rank: int  # 0 for the default output


@dataclass(frozen=True)
class _Input:
    node: int
    name: str
    type: str
    classes: frozenset[str]
    required: bool
    many: bool
    variable: bool


@dataclass(frozen=True)
class _Edge:
    source: int
    output: _Output
    target: _Input
    cost: int


def outputs_of(definition: Mapping[str, Any]) -> list[_Output]:
    if definition.get("hideOutput"):
        return []
    options = definition.get("outputs")
    if options:
        return [_Output(o["name"], tuple(o.get("baseClasses") or ()), k) for k, o in enumerate(options)]
    return [_Output(None, tuple(definition.get("baseClasses") or ()), 0)]


def inputs_of(definition: Mapping[str, Any], node: int) -> list[_Input]:
    found = []
    for item in definition.get("inputs") or []:
        variable = item.get("type") in PARAM_TYPES
        if variable and not item.get("acceptVariable"):
            continue
        conditional = bool(item.get("show") or item.get("hide"))
        found.append(
            _Input(
                node,
                item["name"],
                item["type"],
                frozenset(type_classes(item["type"])),
                not (variable or item.get("optional") or conditional),
                bool(item.get("list")),
                variable,
            )
        )
    return found


def edge_cost(output: _Output, target: _Input) -> int | None:
    """How much worse than a perfect match this connection is (0 best); None when classes do not meet."""
    index = next((k for k, c in enumerate(output.classes) if c in target.classes), None)
    if index is None:
        return None
    cost = 10 * index + 50 * output.rank + (200 if output.classes[index] in GENERIC else 0)
    return cost + (VARIABLE_COST if target.variable else 0)


class _Search:
    """Branch and bound over one primary edge per non-ending node, then fan-out for empty required inputs."""

    def __init__(self, ending: int, candidates: dict[int, list[_Edge]], inputs: list[_Input]) -> None:
        self.ending, self.inputs = ending, inputs
        self.sources = sorted((i for i in candidates if i != ending), key=lambda i: (len(candidates[i]), i))
        # Costs times 100, plus 1 for an edge that does not feed the ending node: among equal wirings an
        # optional input of the ending node wins (the response synthesizer of a sub-question engine).
        self.candidates = {i: [self._retied(c) for c in candidates[i]] for i in self.sources}
        self.best_rest = [
            sum(min((c.cost for c in self.candidates[s]), default=0) for s in self.sources[k:])
            for k in range(len(self.sources) + 1)
        ]
        self.best: tuple[int, list[_Edge]] | None = None
        self.steps = 0

    def _retied(self, edge: _Edge) -> _Edge:
        return _Edge(edge.source, edge.output, edge.target, 100 * edge.cost + (edge.target.node != self.ending))

    def run(self) -> tuple[int, list[_Edge]] | None:
        self._dfs(0, [], 0)
        return self.best

    def _reaches(self, edges: list[_Edge], start: int, goal: int) -> bool:
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            for e in edges:
                if e.source == node and e.target.node not in seen:
                    seen.add(e.target.node)
                    todo.append(e.target.node)
        return False

    def _fits(self, edges: list[_Edge], edge: _Edge) -> bool:
        if not edge.target.many and any(e.target == edge.target for e in edges):
            return False
        return not self._reaches(edges, edge.target.node, edge.source)

    def _dfs(self, k: int, edges: list[_Edge], cost: int) -> None:
        self.steps += 1
        if self.steps > SEARCH_BUDGET or (self.best and cost + self.best_rest[k] >= self.best[0]):
            return
        if k == len(self.sources):
            done = self._fan_out(edges, cost)
            if done and (self.best is None or done[0] < self.best[0]):
                self.best = done
            return
        for edge in self.candidates[self.sources[k]]:
            if self._fits(edges, edge):
                self._dfs(k + 1, edges + [edge], cost + edge.cost)

    def _fan_out(self, edges: list[_Edge], cost: int) -> tuple[int, list[_Edge]] | None:
        chosen = {e.source: e.output for e in edges}
        edges = list(edges)
        for slot in self.inputs:
            if not slot.required or any(e.target == slot for e in edges):
                continue
            options = []
            for source, output in chosen.items():
                extra = edge_cost(output, slot)
                edge = self._retied(_Edge(source, output, slot, FANOUT_COST + (extra or 0)))
                if extra is not None and source != slot.node and self._fits(edges, edge):
                    options.append((edge.cost, sum(e.source == source for e in edges), source, edge))
            if not options:
                return None
            edge = min(options, key=lambda o: o[:3])[3]
            edges.append(edge)
            cost += edge.cost
        return cost, edges


def _unknown(names: Sequence[str], catalog: Mapping[str, Any]) -> None:
    if not names:
        raise PlanError("no nodes given: name at least a chat model and a chain, e.g. chatOpenAI, conversationChain")
    missing = sorted({n for n in names if n not in catalog})
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise PlanError(f"unknown Flowise node{'s' * (len(missing) > 1)}: {shown}; use names from the node catalog")
    for name in names:
        if name == "stickyNote":
            raise PlanError("stickyNote is a canvas note, not a flow step: leave it out")
        if catalog[name].get("category") == "Agent Flows":
            raise PlanError(f"{name} is an Agentflow V2 node: chatflows cannot use it")


def _feeds(slot: _Input, definition: Mapping[str, Any]) -> bool:
    """Whether a node of this definition has an output that fits ``slot``."""
    return any(edge_cost(o, slot) is not None for o in outputs_of(definition))


def _example(catalog: Mapping[str, Any], fits: Any) -> tuple[str, str]:
    """A well-known, non-deprecated catalog node for which ``fits(definition)`` holds, and its kind."""
    pool = [
        d
        for d in catalog.values()
        if d.get("badge") != "DEPRECATING" and d.get("category") != "Agent Flows" and fits(d)
    ]
    if not pool:
        return "", ""
    counts: dict[str, int] = {}
    for d in pool:
        counts[d["category"]] = counts.get(d["category"], 0) + 1
    category = min(counts, key=lambda c: (-counts[c], c))
    names = sorted(d["name"] for d in pool if d["category"] == category)
    name = next((n for n in FAMILIAR if n in names), names[0])
    return name, KINDS.get(category, f"{category} node")


def _explain(
    names: Sequence[str],
    catalog: Mapping[str, Any],
    outs: list[list[_Output]],
    inputs: list[list[_Input]],
    endings: list[int],
) -> None:
    """Raise the PlanError for the first piece found missing; return when every piece is there."""
    if not endings:
        raise PlanError("no ending node: add a chain, agent or engine such as conversationChain or toolAgent")
    for node, slots in enumerate(inputs):
        for slot in slots:
            if slot.required and not any(
                edge_cost(o, slot) is not None for j, os in enumerate(outs) if j != node for o in os
            ):
                example, kind = _example(catalog, functools.partial(_feeds, slot))
                hint = f": add a {kind} such as {example}" if example else ""
                raise PlanError(f"{names[node]} needs a {slot.type} ({slot.name}){hint}")
    takers = [
        i
        for i in range(len(names))
        if any(edge_cost(o, s) is not None for o in outs[i] for j, ss in enumerate(inputs) if j != i for s in ss)
    ]
    lonely = [i for i in range(len(names)) if i not in takers]
    stuck = [i for i in lonely if i not in endings]
    if stuck:
        node = stuck[0]
        classes = {c for o in outs[node] for c in o.classes}
        example, _ = _example(catalog, lambda d: any(classes & s.classes for s in inputs_of(d, 0) if not s.variable))
        hint = f"add a node that takes it, such as {example}, or " if example else ""
        raise PlanError(f"{names[node]}'s output fits no input here: {hint}drop {names[node]}")
    if len(lonely) > 1 and names[lonely[0]] == names[lonely[1]]:
        raise PlanError(f"{names[lonely[0]]} appears twice but only one chain, agent or engine ends a flow: keep one")
    if len(lonely) > 1:
        first, second = names[lonely[0]], names[lonely[1]]
        raise PlanError(f"{first} and {second} both end the flow (nothing takes their output): keep one")


def _crowded(names: Sequence[str], candidates: dict[int, list[_Edge]], endings: list[int]) -> str:
    groups: dict[frozenset[_Input], list[int]] = {}
    for source, edges in candidates.items():
        slots = frozenset(e.target for e in edges)
        if slots and not any(s.many for s in slots):
            groups.setdefault(slots, []).append(source)
    for slots, sources in groups.items():
        if len(sources) > len(slots):
            where = ", ".join(sorted({f"{names[s.node]}.{s.name}" for s in slots}))
            return (
                f"{len(sources)} nodes ({names[sources[0]]}, ...) but only {len(slots)} input(s) take them "
                f"({where}): drop one or add a node that takes it"
            )
    if len(endings) > 1:
        shown = ", ".join(sorted({names[i] for i in endings})[:3])
        return f"{shown}: only one chain, agent or engine ends a flow and no other input here takes the rest; keep one"
    return f"no cycle-free wiring connects {', '.join(sorted(set(names))[:5])}: drop a duplicate node"


def plan_edges(names: Sequence[str], catalog: Mapping[str, Any]) -> list[tuple[int, str | None, int, str]]:
    """The wiring as (source index, output option, target index, input name), without building nodes."""
    _unknown(names, catalog)
    outs = [outputs_of(catalog[n]) for n in names]
    inputs = [inputs_of(catalog[n], i) for i, n in enumerate(names)]
    every_input = [s for slots in inputs for s in slots]
    candidates: dict[int, list[_Edge]] = {}
    for i, options in enumerate(outs):
        found = []
        for output in options:
            for slot in every_input:
                cost = edge_cost(output, slot)
                if cost is not None and slot.node != i:
                    found.append(_Edge(i, output, slot, cost))
        candidates[i] = sorted(found, key=lambda e: (not e.target.required, e.cost, e.target.node))
    endings = [i for i, n in enumerate(names) if catalog[n].get("category") in ENDING_CATEGORIES]
    _explain(names, catalog, outs, inputs, endings)
    # A natural ending (its output fits nothing here) first, later in the list first.
    endings.sort(key=lambda i: (bool(candidates[i]), -i))
    best: tuple[int, list[_Edge]] | None = None
    tried: set[str] = set()
    for ending in endings:
        if names[ending] in tried:  # a twin of a tried ending gives the same wiring, relabelled
            continue
        tried.add(names[ending])
        wiring = _Search(ending, candidates, every_input).run()
        if wiring and (best is None or wiring[0] < best[0]):
            best = wiring
    if best is None:
        raise PlanError(_crowded(names, candidates, endings))
    order = {slot: k for k, slot in enumerate(every_input)}
    edges = sorted(best[1], key=lambda e: (order[e.target], e.source))
    return [(e.source, e.output.name, e.target.node, e.target.name) for e in edges]


def plan_flow(names: Sequence[str], catalog: Mapping[str, Any]) -> Json:
    """A laid-out chatflow ``{nodes, edges}`` wiring the named nodes (one node per name, duplicates allowed)."""
    wiring = plan_edges(names, catalog)
    flow, ids = new_flow(names, catalog)
    for source, output, target, anchor in wiring:
        connect(flow, ids[source], ids[target], anchor, output)
    layout(flow)
    return flow


def replay_marketplace(
    templates: Mapping[str, Mapping[str, Any]], catalog: Mapping[str, Any], check: Any = None
) -> dict[str, dict[str, Any]]:
    """Plan each template from its node names alone and compare: the benchmark of the planner.

    Returns, per template: ``valid`` (``check(flow, catalog)`` found nothing), ``reproduced`` (the
    set of (source name, target name, input) equals the template's own) and ``error`` (the
    PlanError message, if planning failed). ``check`` defaults to ``flowdata.check_flow``.
    """
    from agentloom.packs.flowise.flowdata import check_flow

    check = check or check_flow

    def links(flow: Mapping[str, Any]) -> set[tuple[str, str, str]]:
        names = {n["id"]: n["data"]["name"] for n in flow["nodes"]}
        return {(names[e["source"]], names[e["target"]], input_name(e["targetHandle"])) for e in flow["edges"]}

    results: dict[str, dict[str, Any]] = {}
    for title, template in templates.items():
        names = [n["data"]["name"] for n in template["nodes"] if n["data"]["name"] != "stickyNote"]
        try:
            flow = plan_flow(names, catalog)
        except PlanError as exc:
            results[title] = {"valid": False, "reproduced": False, "error": str(exc)}
            continue
        issues = check(flow, catalog)
        results[title] = {
            "valid": not issues,
            "reproduced": links(flow) == links(template),
            "error": None,
            "issues": issues,
            "missing": sorted(links(template) - links(flow)),
            "extra": sorted(links(flow) - links(template)),
        }
    return results
