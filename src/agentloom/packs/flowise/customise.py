"""Customise a chatflow (a template, usually): its chat model, temperature and memory.

The result must obey every rule of ``flowdata`` as the template did, so a change never edits one
place only:

- ``temperature`` sets ``inputs.temperature`` on each chat model (or LLM, in a flow without chat
  models) that has one.
- ``model`` is either a chat-model node name (``chatAnthropic``) or a model name (``gpt-4o``). A
  node name swaps every chat model for a fresh node of that kind: new id, same position, the
  plain settings both kinds share (temperature, max tokens...) carried over, every edge re-pointed
  with handles of the new node, every ``{{oldId.data.instance}}`` reference rewritten, and the
  swap refused when the new node's classes do not fit an input it would feed (a LangChain model
  cannot feed a LlamaIndex engine). A model name goes into the chat model's ``modelName`` (or
  ``model``) input; a name that looks like a misspelt node name is refused rather than stored. A
  model name of another vendor (``model_providers.json``: gpt-4o on a Mistral node) first swaps the
  node for that vendor's, as a node name would, or is refused when the flow's framework has none:
  a node is never told to run another vendor's model.
- ``memory_type`` swaps the memory node the same way, or adds one and connects it to the first
  free input that takes it (the ending node's first) when the flow has none. A swapped-in node
  whose own required inputs are empty (a summary memory needs a chat model) is fed from the
  flow's nodes that fit.

Nodes keep their positions; ``layout.resolve_overlaps`` moves down only the nodes a taller
replacement or an added node now overlaps. Bad values raise ``PlanError`` naming the argument and
a few valid choices.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from agentloom.packs.flowise.flowdata import (
    Json,
    add_reference,
    chosen_output,
    compatible,
    connect,
    edge_id,
    handle_classes,
    input_name,
    input_slot,
    new_node,
    new_node_id,
    output_options,
    reference,
    several_outputs,
)
from agentloom.packs.flowise.layout import COLUMN_PITCH, ROW_GAP, resolve_overlaps
from agentloom.packs.flowise.planner import FAMILIAR, PlanError

MODEL_CATEGORIES = ("Chat Models", "LLMs")  # LLMs only when the flow has no chat model
PROVIDERS = "model_providers.json"
MAX_FILE_BYTES = 30 * 2**20  # base64 grows it by a third, under Flowise's default 50 MB request limit
UNCARRIED = frozenset({"modelName", "model", "credential", "password", "file", "folder"})


def customise(
    flow_data: Mapping[str, Any] | str,
    catalog: Mapping[str, Any],
    *,
    model: str | None = None,
    temperature: float | None = None,
    memory_type: str | None = None,
) -> Json:
    """A customised copy of ``flow_data`` (a dict or its JSON string); the input is left untouched."""
    flow: Json = json.loads(flow_data) if isinstance(flow_data, str) else copy.deepcopy(dict(flow_data))
    flow.setdefault("edges", [])
    before = {n["id"] for n in flow["nodes"]}
    added: list[str] = []
    if model is not None:
        _set_model(flow, catalog, model)
    if memory_type is not None:
        added += _set_memory(flow, catalog, memory_type)
    if temperature is not None:
        _set_temperature(flow, temperature)
    # Swapped-in nodes keep their place and push neighbours down; an added node moves itself.
    rank = {n["id"]: 1 if n["id"] in added else 0 if n["id"] in before else -1 for n in flow["nodes"]}
    resolve_overlaps(flow, rank)
    return flow


def _nodes_in(flow: Json, category: str) -> list[Json]:
    return [n for n in flow["nodes"] if n["data"].get("category") == category]


def _model_nodes(flow: Json) -> list[Json]:
    for category in MODEL_CATEGORIES:
        if found := _nodes_in(flow, category):
            return found
    return []


def _choices(catalog: Mapping[str, Any], category: str, handles: Sequence[str] = (), near: str = "") -> str:
    """Two catalog nodes of ``category`` whose outputs fit every handle: the names nearest ``near``
    (chatAnthropic -> chatAnthropic_LlamaIndex), else well-known ones first. Two keep errors short."""

    def fits(definition: Mapping[str, Any]) -> bool:
        classes = [set(o.get("baseClasses") or ()) for o in definition.get("outputs") or []]
        classes = classes or [set(definition.get("baseClasses") or ())]
        return any(all(c & handle_classes(h) for h in handles) for c in classes)

    pool = sorted(d["name"] for d in catalog.values() if d.get("category") == category and fits(d))
    fresh = [n for n in pool if catalog[n].get("badge") != "DEPRECATING"] or pool
    ranked = [n for n in FAMILIAR if n in fresh] + [n for n in fresh if n not in FAMILIAR]
    if near:
        ranked.sort(key=lambda n: -difflib.SequenceMatcher(None, near.lower(), n.lower()).ratio())
    return ", ".join(ranked[:2]) or "none in this catalog"


def _rename(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_rename(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, old, new) for k, v in value.items()}
    return value


def _reaches(flow: Json, start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        for e in flow["edges"]:
            if e["source"] == node and e["target"] not in seen:
                seen.add(e["target"])
                todo.append(e["target"])
    return False


def replace_node(
    flow: Json, old_id: str, definition: Mapping[str, Any], catalog: Mapping[str, Any], argument: str
) -> str:
    """Swap node ``old_id`` for a new node of ``definition`` in place; returns the new id."""
    index = next(k for k, n in enumerate(flow["nodes"]) if n["id"] == old_id)
    old = flow["nodes"][index]
    new_id = new_node_id(definition["name"], {n["id"] for n in flow["nodes"]})
    new = new_node(definition, new_id, old["position"]["x"], old["position"]["y"])
    data, name = new["data"], definition["name"]
    for param in data["inputParams"]:
        if param["name"] not in UNCARRIED and param["type"] not in UNCARRIED and param["name"] in old["data"]["inputs"]:
            if any(p["name"] == param["name"] and p["type"] == param["type"] for p in old["data"]["inputParams"]):
                data["inputs"][param["name"]] = old["data"]["inputs"][param["name"]]
    feeds = [e["targetHandle"] for e in flow["edges"] if e["source"] == old_id]
    previous = (chosen_output(old["data"]) or {}).get("name")
    options = sorted(output_options(data), key=lambda o: o.get("name") != previous)
    option = next((o for o in options if all(compatible(o["id"], h) for h in feeds)), None)
    if option is None:
        needed = next(h for h in feeds if not any(compatible(o["id"], h) for o in options)).split("-")[-1]
        raise PlanError(
            f"{argument}: {name} is not the {needed.split('|')[0]} this flow needs; "
            f"try {_choices(catalog, definition['category'], feeds, name)}"
        )
    if several_outputs(data):
        data["outputs"]["output"] = option["name"]
    edges = []
    for edge in flow["edges"]:
        if edge["source"] == old_id:
            edge = {**edge, "source": new_id, "sourceHandle": option["id"]}
        elif edge["target"] == old_id:
            slot = input_slot(data, input_name(edge["targetHandle"]))
            if slot is None or not compatible(edge["sourceHandle"], slot["id"]):
                # The new node does without this input (a summary memory's model): drop the edge, unless
                # that leaves its source unconnected.
                if any(e["source"] == edge["source"] and e["target"] != old_id for e in flow["edges"]):
                    continue
                raise PlanError(
                    f"{argument}: {name} has no input for {edge['source']}; "
                    f"try {_choices(catalog, definition['category'], feeds, name)}"
                )
            edge = {**edge, "target": new_id, "targetHandle": slot["id"]}
            add_reference(data, slot, edge["source"])
        edge["id"] = edge_id(edge["source"], edge["sourceHandle"], edge["target"], edge["targetHandle"])
        edges.append(edge)
    flow["edges"] = edges
    flow["nodes"][index] = new
    for node in flow["nodes"]:
        node["data"]["inputs"] = _rename(node["data"].get("inputs") or {}, reference(old_id), reference(new_id))
    _feed_required(flow, new_id, catalog, argument)
    return new_id


def _feed_required(flow: Json, node_id: str, catalog: Mapping[str, Any], argument: str) -> None:
    """Fill the new node's empty required inputs from flow nodes whose chosen output fits (no cycle)."""
    node = next(n for n in flow["nodes"] if n["id"] == node_id)
    for anchor in node["data"]["inputAnchors"]:
        if anchor.get("optional") or any(e["targetHandle"] == anchor["id"] for e in flow["edges"]):
            continue
        source = next(
            (
                n
                for n in flow["nodes"]
                if n["id"] != node_id
                and (out := chosen_output(n["data"]))
                and compatible(out["id"], anchor["id"])
                and not _reaches(flow, node_id, n["id"])
            ),
            None,
        )
        if source is None:
            feeds = [e["targetHandle"] for e in flow["edges"] if e["source"] == node_id]
            raise PlanError(
                f"{argument}: {node['data']['name']} needs a {anchor['type']} this flow lacks; "
                f"try {_choices(catalog, node['data']['category'], feeds)}"
            )
        connect(flow, source["id"], node_id, anchor["name"])


def _set_model(flow: Json, catalog: Mapping[str, Any], model: str) -> None:
    if not isinstance(model, str) or not model.strip():
        raise PlanError("model: give a chat model node such as chatAnthropic or a model name such as gpt-4o-mini")
    targets = _model_nodes(flow)
    if not targets:
        raise PlanError("model: this flow has no chat model or LLM node to change")
    definition = catalog.get(model)
    if definition is not None:
        if definition.get("category") not in MODEL_CATEGORIES:
            raise PlanError(
                f"model: {model} is a {definition.get('category')} node, not a chat model; "
                f"try {_choices(catalog, 'Chat Models')}"
            )
        for node in targets:
            if node["data"]["name"] != model:
                replace_node(flow, node["id"], definition, catalog, "model")
        return
    names = [n for n, d in catalog.items() if d.get("category") in MODEL_CATEGORIES]
    close = difflib.get_close_matches(model, names, n=1, cutoff=0.85)
    if close:
        raise PlanError(f"model: no chat model node {model!r}; did you mean {close[0]}?")
    owner = model_provider(model)
    for target in targets:
        node = target
        name = node["data"]["name"]
        if owner is not None and name not in owner and name in _vendor_nodes():
            # Another vendor's model on a vendor's own node: that vendor's node takes this one's place, never a
            # node told to run it. Gateways (azureChatOpenAI, awsChatBedrock, chatOpenRouter...) keep theirs.
            wanted = owner[1] if name.endswith("_LlamaIndex") else owner[0]
            if wanted is None or wanted not in catalog:
                raise PlanError(
                    f"model: {model} runs on {owner[0]}, which cannot replace {name} in this flow; "
                    f"name another {name} model"
                )
            new_id = replace_node(flow, node["id"], catalog[wanted], catalog, "model")
            node = next(n for n in flow["nodes"] if n["id"] == new_id)
        params = {p["name"]: p for p in node["data"]["inputParams"]}
        param = params.get("modelName") or params.get("model")
        if param is None:
            raise PlanError(f"model: {node['data']['name']} takes no model name; name a node instead, e.g. chatOpenAI")
        options = param.get("options") or []
        offered = [o["name"] for o in options if isinstance(o, dict) and isinstance(o.get("name"), str)]
        if param["type"] == "options" and model not in offered:
            raise PlanError(f"model: {node['data']['name']} offers no {model!r}; try {', '.join(offered[:2])}")
        node["data"]["inputs"][param["name"]] = model


@functools.cache
def _providers() -> list[tuple[re.Pattern[str], str, str | None]]:
    raw = json.loads(resources.files("agentloom.packs.flowise").joinpath(PROVIDERS).read_text(encoding="utf-8"))
    return [(re.compile(p["pattern"], re.IGNORECASE), p["langchain"], p["llamaindex"]) for p in raw["providers"]]


@functools.cache
def _vendor_nodes() -> frozenset[str]:
    return frozenset(name for _, *nodes in _providers() for name in nodes if name is not None)


def model_provider(model: str) -> tuple[str, str | None] | None:
    """The chat-model nodes (LangChain, LlamaIndex or None) that run ``model``, or None when the name says no
    vendor (``model_providers.json``)."""
    for pattern, langchain, llamaindex in _providers():
        if pattern.search(model.strip()):
            return langchain, llamaindex
    return None


def apply_settings(flow: Json, settings: Mapping[str, Any]) -> None:
    """Set node inputs: ``{node id, name or label: {input name or label: value}}``, each value checked against
    the input's definition (type, options); the reply's ``fill`` then lists what is still empty."""
    if not isinstance(settings, Mapping):
        raise PlanError('settings: give {"node": {"input": value}}, e.g. {"chatOpenAI_0": {"modelName": "gpt-4o"}}')
    for key, values in settings.items():
        targets = _nodes_named(flow, str(key))
        if not targets:
            ids = ", ".join(n["id"] for n in flow["nodes"][:6])
            raise PlanError(f"settings: no node {key!r} in this flow; its nodes: {ids}")
        if not isinstance(values, Mapping) or not values:
            raise PlanError(f'settings.{key}: give its inputs as {{"input": value}}')
        for node in targets:
            for field, value in values.items():
                param = _param(node, str(field))
                node["data"]["inputs"][param["name"]] = _checked(node, param, value)
                if param.get("type") == "file":
                    _name_source(node, value)


def _name_source(node: Json, value: Any) -> None:
    """A document loader given one file names it as its documents' source, unless its metadata says
    otherwise: Flowise would call an uploaded file's documents "blob", and answers cite their sources."""
    inputs = node["data"]["inputs"]
    has_metadata = any(p["name"] == "metadata" and p["type"] == "json" for p in node["data"]["inputParams"])
    if has_metadata and isinstance(value, str) and not value.startswith("data:") and not inputs.get("metadata"):
        inputs["metadata"] = json.dumps({"source": Path(value).name})


def _nodes_named(flow: Json, key: str) -> list[Json]:
    """The nodes a settings key names: an id, else every node of that name, else of that label (any case)."""
    by_id = [n for n in flow["nodes"] if n["id"] == key]
    if by_id:
        return by_id
    by_name = [n for n in flow["nodes"] if n["data"].get("name") == key]
    if by_name:
        return by_name
    return [n for n in flow["nodes"] if str(n["data"].get("label", "")).lower() == key.lower()]


def _param(node: Json, field: str) -> Json:
    data = node["data"]
    params: list[Json] = data.get("inputParams") or []
    for param in params:
        if field in (param["name"], str(param.get("label", ""))) or field.lower() == str(param.get("label")).lower():
            return param
    if any(field in (a["name"], a.get("label")) for a in data.get("inputAnchors") or []):
        raise PlanError(f"settings.{node['id']}.{field}: a connection, not a setting; name the node in nodes")
    names = ", ".join(p["name"] for p in params[:8])
    raise PlanError(f"settings.{node['id']}: no input {field!r}; its inputs: {names}")


def _checked(node: Json, param: Json, value: Any) -> Any:
    where, kind = f"settings.{node['id']}.{param['name']}", param.get("type")
    if kind == "credential":
        raise PlanError(f"{where}: credentials are attached by credential name, not as a setting")
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PlanError(f"{where}: expects a number, got {value!r}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise PlanError(f"{where}: expects true or false, got {value!r}")
    elif kind in ("options", "multiOptions"):
        options = {o["name"]: o["name"] for o in param.get("options") or [] if isinstance(o, dict)}
        options.update(
            {str(o.get("label")).lower(): o["name"] for o in param.get("options") or [] if isinstance(o, dict)}
        )
        chosen = value if kind == "multiOptions" and isinstance(value, list) else [value]
        picked = [options.get(v, options.get(str(v).lower())) for v in chosen]
        if None in picked:
            raise PlanError(f"{where}: {value!r} is not offered; choose from {', '.join(list(options)[:6])}")
        return picked if kind == "multiOptions" else picked[0]
    elif kind == "file":
        return file_value(where, value)
    elif kind == "json":
        if not isinstance(value, str | dict | list):
            raise PlanError(f"{where}: expects JSON (an object, a list or its text)")
        return value if isinstance(value, str) else json.dumps(value)
    elif not isinstance(value, str):
        raise PlanError(f"{where}: expects text, got {value!r}")
    return value


def file_value(where: str, value: Any) -> str:
    """A file input's value as Flowise stores an upload: ``data:<type>;base64,<bytes>,filename:<name>``, from a
    path on this machine (or several, as a list); a value already in that form is kept."""
    paths = value if isinstance(value, list) else [value]
    if not paths or not all(isinstance(p, str) and p.strip() for p in paths):
        raise PlanError(f"{where}: give the path of a file on this machine (or a list of paths)")
    encoded = [p if p.startswith("data:") else _data_url(where, p) for p in paths]
    return encoded[0] if len(encoded) == 1 else json.dumps(encoded)


def _data_url(where: str, path: str) -> str:
    import base64
    import mimetypes

    file = Path(path).expanduser()
    if not file.is_file():
        raise PlanError(f"{where}: no file {path!r} on this machine; give its full path")
    size = file.stat().st_size
    if size > MAX_FILE_BYTES:
        raise PlanError(
            f"{where}: {file.name} is {size / 2**20:.0f} MiB; Flowise takes uploads up to "
            f"{MAX_FILE_BYTES // 2**20} MiB here: split it or use a document store"
        )
    kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return f"data:{kind};base64,{base64.b64encode(file.read_bytes()).decode()},filename:{file.name}"


def _set_temperature(flow: Json, temperature: float) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise PlanError(f"temperature: {temperature!r} is not a number from 0 to 2; e.g. 0.2 for focused answers")
    nodes = [n for n in _model_nodes(flow) if any(p["name"] == "temperature" for p in n["data"]["inputParams"])]
    if not nodes:
        raise PlanError("temperature: this flow has no chat model with a temperature setting")
    for node in nodes:
        node["data"]["inputs"]["temperature"] = temperature


def _set_memory(flow: Json, catalog: Mapping[str, Any], memory_type: str) -> list[str]:
    """Swap the flow's memory nodes, or add one; returns the id of a node added."""
    definition = catalog.get(memory_type) if isinstance(memory_type, str) else None
    if definition is None or definition.get("category") != "Memory":
        raise PlanError(f"memory_type: {memory_type!r} is not a memory node; try bufferMemory or bufferWindowMemory")
    existing = _nodes_in(flow, "Memory")
    for node in existing:
        if node["data"]["name"] != memory_type:
            replace_node(flow, node["id"], definition, catalog, "memory_type")
    if existing:
        return []
    new_id = new_node_id(memory_type, {n["id"] for n in flow["nodes"]})
    memory = new_node(definition, new_id)
    handle = (chosen_output(memory["data"]) or {}).get("id", "")
    taken = {e["targetHandle"] for e in flow["edges"]}
    ends = {n["id"] for n in flow["nodes"]} - {e["source"] for e in flow["edges"]}
    slots = [
        (node, a)
        for node in sorted(flow["nodes"], key=lambda n: n["id"] not in ends)
        for a in node["data"].get("inputAnchors") or []
        if a["id"] not in taken and compatible(handle, a["id"])
    ]
    if not slots:
        raise PlanError(
            f"memory_type: no free input here takes {memory_type}; pick a template whose chain or "
            "agent has a memory input"
        )
    target, anchor = slots[0]
    x, y = target["position"]["x"] - COLUMN_PITCH, target["position"]["y"] + (target.get("height") or 0) + ROW_GAP
    memory["position"], memory["positionAbsolute"] = {"x": x, "y": y}, {"x": x, "y": y}
    flow["nodes"].append(memory)
    connect(flow, new_id, target["id"], anchor["name"])
    _feed_required(flow, new_id, catalog, "memory_type")
    return [new_id]
