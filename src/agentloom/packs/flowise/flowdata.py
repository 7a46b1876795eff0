"""Chatflow flowData pieces made the way the Flowise canvas makes them, and the check that proves it.

Flowise stores a chatflow as React Flow JSON (``{nodes, edges}``) and validates nothing on save,
so a flow made through the API must look like one made in the canvas. The rules below are ported
from the UI (``initNode``, ``onConnect``, ``isValidConnection`` in ``packages/ui``) and from what
the server needs at run time:

- A node id is ``<name>_<n>`` with the smallest free n. Handles are split on ``-``, so an id never
  holds one.
- Node data is the catalog definition with its ``inputs`` list split in two. Inputs of a plain
  type (``PARAM_TYPES``) become ``inputParams``; any other type names classes and becomes an
  ``inputAnchor`` that takes another node. Each gets ``id = <nodeId>-input-<name>-<type>``; a
  credential goes first among the params. ``inputs`` maps every input to its default with
  JavaScript truthiness (``default || ''``: a false or 0 default becomes ``""``, as in the UI).
- One output: one anchor whose id ends in the base classes joined by ``|``. Several outputs: one
  ``options`` anchor with an option per output, and ``data.outputs.output`` names the chosen one;
  every edge leaving the node starts at that option, because the server builds only that one.
- A connection lives in two places: the edge, and ``{{<sourceId>.data.instance}}`` in the target's
  ``data.inputs[anchor]`` (a list for ``list`` anchors). The server wires instances from the
  latter, so an edge alone connects nothing. Parameters with ``acceptVariable`` take edges too,
  but the UI leaves their value alone (the user writes the variable into the text).
- A connection is valid when the last ``-`` segment of both handles, split on ``|``, share a
  class; a non-list input takes one edge.
- The flow runs from its one ending node (no outgoing edge), which must be a chain, an agent or an
  engine. Sticky notes are comments and take no part.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

Json = dict[str, Any]

# The UI's whitelist: inputs of these types are parameters set in the form, all others are anchors.
PARAM_TYPES = frozenset(
    {
        "asyncOptions",
        "asyncMultiOptions",
        "options",
        "multiOptions",
        "array",
        "datagrid",
        "string",
        "number",
        "boolean",
        "password",
        "json",
        "code",
        "date",
        "file",
        "folder",
        "tabs",
        "conditionFunction",
        "timePicker",
        "weekDaysPicker",
        "monthDaysPicker",
        "datePicker",
    }
)
ENDING_CATEGORIES = frozenset({"Chains", "Agents", "Engine", "Multi Agents", "Sequential Agents"})
NODE_WIDTH = 300
# Keys of node data the UI keeps when it exports a flow (generateExportFlowData); the catalog's
# extras (filePath, loadMethods, icon, credential, ...) are server-side and stay out.
DATA_KEYS = (
    "label",
    "version",
    "name",
    "type",
    "color",
    "hideOutput",
    "hideInput",
    "baseClasses",
    "tags",
    "category",
    "description",
)
REFERENCE = re.compile(r"\{\{([^{}.\s]+)\.data\.instance\}\}")


def new_node_id(name: str, taken: Collection[str]) -> str:
    """``<name>_<n>`` with the smallest n not in ``taken`` (the canvas's getUniqueNodeId)."""
    if "-" in name:
        raise ValueError(f"node name {name!r} contains '-': Flowise splits handles on '-', use a catalog name")
    n = 0
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


def reference(node_id: str) -> str:
    """The string a target's ``data.inputs`` holds for an edge coming from ``node_id``."""
    return "{{" + node_id + ".data.instance}}"


def _js_default(value: Any) -> Any:
    """``value || ''``: JavaScript's falsy values (not ``[]``/``{}``, which JS holds true) become ''."""
    if value is None or value is False or value == "" or (isinstance(value, (int, float)) and value == 0):
        return ""
    return value


def _input_id(node_id: str, item: Mapping[str, Any]) -> str:
    return f"{node_id}-input-{item['name']}-{item['type']}"


def _output_anchors(definition: Mapping[str, Any], node_id: str) -> list[Json]:
    if definition.get("hideOutput"):
        return []
    outputs = definition.get("outputs")
    if outputs:
        options = []
        for output in outputs:
            classes = list(output.get("baseClasses") or [])
            option = {
                "id": f"{node_id}-output-{output['name']}-{'|'.join(classes)}",
                "name": output["name"],
                "label": output.get("label"),
                "description": output.get("description") or "",
                "type": " | ".join(classes),
            }
            option.update({k: output[k] for k in ("isAnchor", "hidden") if k in output})
            options.append(option)
        return [
            {
                "name": "output",
                "label": "Output",
                "type": "options",
                "description": outputs[0].get("description") or "",
                "options": options,
                "default": outputs[0]["name"],
            }
        ]
    classes = list(definition.get("baseClasses") or [])
    return [
        {
            "id": f"{node_id}-output-{definition['name']}-{'|'.join(classes)}",
            "name": definition["name"],
            "label": definition.get("type"),
            "description": definition.get("description") or "",
            "type": " | ".join(classes),
        }
    ]


def init_node_data(definition: Mapping[str, Any], node_id: str) -> Json:
    """Node ``data`` for a catalog definition, as the canvas's ``initNode`` makes it when a node is dropped."""
    if "-" in node_id:
        raise ValueError(f"node id {node_id!r} contains '-': Flowise splits handles on '-', use new_node_id()")
    source = copy.deepcopy(dict(definition))
    inputs = source.get("inputs") or []
    params: list[Json] = []
    anchors: list[Json] = []
    for item in inputs:
        (params if item.get("type") in PARAM_TYPES else anchors).append({**item, "id": _input_id(node_id, item)})
    credential = source.get("credential")
    if credential:
        params.insert(0, {**credential, "id": _input_id(node_id, credential)})
    output_anchors = _output_anchors(source, node_id)
    data: Json = {"id": node_id}
    data.update({key: source[key] for key in DATA_KEYS if key in source})
    data["inputParams"] = params
    data["inputAnchors"] = anchors
    data["inputs"] = {item["name"]: _js_default(item.get("default")) for item in inputs}
    data["outputAnchors"] = output_anchors
    has_outputs = source.get("outputs") is not None
    data["outputs"] = {a["name"]: _js_default(a.get("default")) for a in output_anchors} if has_outputs else {}
    data["selected"] = False
    return data


def estimate_height(data: Mapping[str, Any]) -> int:
    """The height (px) the canvas will draw a node at, from what it shows.

    Fitted on the 131 nodes of the 24 marketplace chatflows (heights 142-772): a base, plus each
    visible parameter (multi-line text counts more), the credential, each anchor, the output
    dropdown and the "Additional Parameters" button. The mean error is about 25 px; the layout
    leaves a gap larger than that between nodes.
    """
    params = data.get("inputParams") or []
    visible = [p for p in params if not p.get("additionalParams") and p.get("type") != "credential"]
    credential = any(p.get("type") == "credential" for p in params)
    extra = any(p.get("additionalParams") for p in params)
    height = (
        180
        + 90 * len(visible)
        + 130 * sum(1 for p in visible if p.get("rows"))
        + 75 * credential
        + 45 * len(data.get("inputAnchors") or [])
        + 45 * several_outputs(data)
        + 75 * extra
    )
    return max(142, min(900, height))


def is_sticky(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "stickyNote" or node.get("data", {}).get("name") == "stickyNote"


def new_node(definition: Mapping[str, Any], node_id: str, x: float = 0, y: float = 0) -> Json:
    """A canvas node object holding ``init_node_data``, with an estimated height."""
    data = init_node_data(definition, node_id)
    kind = "stickyNote" if definition.get("type") == "StickyNote" else "customNode"
    return {
        "id": node_id,
        "position": {"x": x, "y": y},
        "type": kind,
        "width": NODE_WIDTH,
        "height": estimate_height(data),
        "selected": False,
        "positionAbsolute": {"x": x, "y": y},
        "dragging": False,
        "data": data,
    }


def new_flow(names: Iterable[str], catalog: Mapping[str, Any]) -> tuple[Json, list[str]]:
    """(flow, ids): an unwired ``{nodes, edges}`` with one ``new_node`` per name, in order, and their ids."""
    flow: Json = {"nodes": [], "edges": []}
    ids: list[str] = []
    for name in names:
        ids.append(new_node_id(name, ids))
        flow["nodes"].append(new_node(catalog[name], ids[-1]))
    return flow, ids


def type_classes(type_string: str) -> set[str]:
    """Classes named by an anchor ``type``: ``"Start | Agent"`` names two."""
    return {part.strip() for part in str(type_string).split("|") if part.strip()}


def handle_classes(handle: str) -> set[str]:
    """Classes a handle carries: its last ``-`` segment split on ``|`` (as isValidConnection reads it)."""
    return type_classes(handle.split("-")[-1])


def input_name(handle: str) -> str:
    """The name of the input a target handle (``<nodeId>-input-<name>-<type>``) belongs to."""
    return handle.split("-")[2]


def compatible(source_handle: str, target_handle: str) -> bool:
    return bool(handle_classes(source_handle) & handle_classes(target_handle))


def output_options(data: Mapping[str, Any]) -> list[Json]:
    """The handles edges may start from: the single output anchor, or every option of a dropdown."""
    result: list[Json] = []
    for anchor in data.get("outputAnchors") or []:
        result.extend(anchor.get("options") or [] if anchor.get("type") == "options" else [anchor])
    return result


def several_outputs(data: Mapping[str, Any]) -> bool:
    return any(a.get("type") == "options" for a in data.get("outputAnchors") or [])


def chosen_output(data: Mapping[str, Any]) -> Json | None:
    """The output edges leave from: the single anchor, or the option named by ``data.outputs.output``."""
    options = output_options(data)
    if not several_outputs(data):
        return options[0] if options else None
    name = (data.get("outputs") or {}).get("output")
    return next((o for o in options if o.get("name") == name), None)


def input_slot(data: Mapping[str, Any], name: str) -> Json | None:
    """The input an edge may end at: an anchor, or a parameter that accepts variables."""
    anchors: list[Json] = data.get("inputAnchors") or []
    params: list[Json] = data.get("inputParams") or []
    for anchor in anchors:
        if anchor.get("name") == name:
            return anchor
    for param in params:
        if param.get("name") == name and param.get("acceptVariable"):
            return param
    return None


def edge_id(source: str, source_handle: str, target: str, target_handle: str) -> str:
    return f"{source}-{source_handle}-{target}-{target_handle}"


def _tool_rank(item: str) -> int:
    # The UI puts request/file readers before writers before everything else (rearrangeToolsOrdering).
    if "requestsGet" in item or "readFile" in item:
        return 0
    return 1 if "requestsPost" in item or "writeFile" in item else 2


def add_reference(data: Json, slot: Mapping[str, Any], source_id: str) -> None:
    """Record an edge in the target's ``data.inputs`` the way the canvas's onConnect does."""
    name = slot["name"]
    inputs = data.setdefault("inputs", {})
    if slot.get("acceptVariable") and slot.get("type") in PARAM_TYPES:
        inputs[name] = inputs.get(name) or ""
    elif slot.get("list"):
        values = list(inputs.get(name) or [])
        values.append(reference(source_id))
        if name == "tools":
            values.sort(key=_tool_rank)
        inputs[name] = values
    else:
        inputs[name] = reference(source_id)


def _node(flow: Mapping[str, Any], node_id: str) -> Json:
    nodes: list[Json] = flow["nodes"]
    for node in nodes:
        if node["id"] == node_id:
            return node
    raise ValueError(f"no node {node_id!r} in the flow: connect existing node ids")


def connect(flow: Json, source_id: str, target_id: str, input_name: str, output: str | None = None) -> Json:
    """Add the edge ``source -> target.input_name`` and its ``data.inputs`` reference; returns the edge.

    For a node with several outputs, ``output`` names the option (default: the one already chosen);
    all edges of a node leave from one option, so choosing another one while edges exist is refused.
    """
    source, target = _node(flow, source_id), _node(flow, target_id)
    data = source["data"]
    if several_outputs(data):
        current = data.setdefault("outputs", {}).get("output")
        wanted = output or current
        used = any(e["source"] == source_id for e in flow["edges"])
        if used and wanted != current:
            raise ValueError(f"{source_id} already sends its {current!r} output; a node sends one output only")
        if not any(o.get("name") == wanted for o in output_options(data)):
            names = [o.get("name") for o in output_options(data)]
            raise ValueError(f"{source_id} has no output {wanted!r}: choose one of {names}")
        data["outputs"]["output"] = wanted
    handle = chosen_output(data)
    slot = input_slot(target["data"], input_name)
    if handle is None or slot is None:
        raise ValueError(f"{target_id} has no input {input_name!r} that takes an edge, or {source_id} has no output")
    if not compatible(handle["id"], slot["id"]):
        raise ValueError(f"{source_id} ({handle['type']}) does not fit {target_id}.{input_name} ({slot['type']})")
    into = [e for e in flow["edges"] if e["targetHandle"] == slot["id"]]
    if any(e["source"] == source_id for e in into) or (into and not slot.get("list")):
        raise ValueError(f"{target_id}.{input_name} is already connected and takes one edge")
    edge = {
        "source": source_id,
        "sourceHandle": handle["id"],
        "target": target_id,
        "targetHandle": slot["id"],
        "type": "buttonedge",
        "id": edge_id(source_id, handle["id"], target_id, slot["id"]),
    }
    flow["edges"].append(edge)
    add_reference(target["data"], slot, source_id)
    return edge


def _holds_reference(value: Any, source_id: str) -> bool:
    ref = reference(source_id)
    return value == ref or (isinstance(value, list) and ref in value)


def _referenced(value: Any) -> Iterable[str]:
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            yield from REFERENCE.findall(item)


def overlaps(a: Mapping[str, Any], b: Mapping[str, Any], gap: float = 0.0) -> bool:
    """Whether two nodes' boxes overlap, each counted ``gap`` px taller (a missing height counts 0)."""
    ax, ay, aw, ah = _box(a)
    bx, by, bw, bh = _box(b)
    return ax < bx + bw and bx < ax + aw and ay < by + bh + gap and by < ay + ah + gap


def _box(node: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """A node's x, y, width and height (a missing width counts NODE_WIDTH, a missing height 0)."""
    return node["position"]["x"], node["position"]["y"], node.get("width") or NODE_WIDTH, node.get("height") or 0


def _edge_issues(edge: Mapping[str, Any], nodes: Mapping[str, Json]) -> list[str]:
    source, target = nodes.get(edge.get("source", "")), nodes.get(edge.get("target", ""))
    label = f"edge {edge.get('source')} -> {edge.get('target')}"
    if source is None or target is None:
        return [f"{label}: a node is missing"]
    issues = []
    sh, th = edge.get("sourceHandle", ""), edge.get("targetHandle", "")
    option = next((o for o in output_options(source["data"]) if o.get("id") == sh), None)
    slot = next(
        (
            s
            for s in (target["data"].get("inputAnchors") or []) + (target["data"].get("inputParams") or [])
            if s.get("id") == th
        ),
        None,
    )
    if option is None:
        issues.append(f"{label}: {source['id']} has no output handle {sh}")
    elif several_outputs(source["data"]) and option.get("name") != (source["data"].get("outputs") or {}).get("output"):
        issues.append(f"{label}: leaves output {option.get('name')!r} but data.outputs.output is another")
    if slot is None:
        issues.append(f"{label}: {target['id']} has no input handle {th}")
    elif not slot.get("acceptVariable") or slot.get("type") not in PARAM_TYPES:
        if not _holds_reference(target["data"].get("inputs", {}).get(slot["name"]), source["id"]):
            issues.append(f"{label}: {target['id']}.data.inputs.{slot['name']} lacks {reference(source['id'])}")
    if not compatible(sh, th):
        issues.append(f"{label}: classes of {sh.split('-')[-1]} and {th.split('-')[-1]} do not meet")
    if edge.get("id") != edge_id(source["id"], sh, target["id"], th):
        issues.append(f"{label}: id is not <source>-<sourceHandle>-<target>-<targetHandle>")
    return issues


def _cycle(ids: Iterable[str], edges: list[Json]) -> bool:
    nxt: dict[str, set[str]] = {}
    for e in edges:
        nxt.setdefault(e["source"], set()).add(e["target"])
    state: dict[str, int] = {}

    def visit(node: str) -> bool:
        state[node] = 1
        for t in nxt.get(node, ()):
            if state.get(t) == 1 or (t not in state and visit(t)):
                return True
        state[node] = 2
        return False

    return any(node not in state and visit(node) for node in ids)


def check_flow(flow: Mapping[str, Any], catalog: Mapping[str, Any] | None = None) -> list[str]:
    """Every rule of the module docstring that ``flow`` breaks, one short sentence each; [] when sound."""
    issues: list[str] = []
    nodes = {n["id"]: n for n in flow.get("nodes", [])}
    edges = list(flow.get("edges", []))
    if len(nodes) != len(flow.get("nodes", [])):
        issues.append("node ids are not unique")
    steps = {i: n for i, n in nodes.items() if not is_sticky(n)}
    for node_id, node in steps.items():
        data = node["data"]
        if "-" in node_id or data.get("id") != node_id:
            issues.append(f"node {node_id}: ids must not hold '-' and data.id must equal the node id")
        if catalog is not None and data.get("name") not in catalog:
            issues.append(f"node {node_id}: {data.get('name')} is not in the server's catalog")
        for key in ("inputParams", "inputAnchors", "outputAnchors"):
            if not isinstance(data.get(key), list):
                issues.append(f"node {node_id}: data.{key} must be a list")
        for anchor in data.get("inputAnchors") or []:
            count = sum(1 for e in edges if e.get("targetHandle") == anchor.get("id"))
            if count > 1 and not anchor.get("list"):
                issues.append(f"node {node_id}: input {anchor['name']} takes one edge, has {count}")
            if count == 0 and not (anchor.get("optional") or anchor.get("show") or anchor.get("hide")):
                issues.append(f"node {node_id}: required input {anchor['name']} ({anchor.get('type')}) is empty")
            value = data.get("inputs", {}).get(anchor.get("name"))
            for source in _referenced(value):
                if not any(e["source"] == source and e.get("targetHandle") == anchor.get("id") for e in edges):
                    issues.append(f"node {node_id}: input {anchor['name']} refers to {source} without an edge")
        if not any(e.get("source") == node_id or e.get("target") == node_id for e in edges):
            issues.append(f"node {node_id}: not connected to anything")
    for edge in edges:
        issues.extend(_edge_issues(edge, nodes))
    endings = [i for i in steps if not any(e.get("source") == i for e in edges)]
    if len(endings) != 1:
        issues.append(f"flow needs exactly one ending node (no outgoing edge), has {len(endings)}: {endings[:4]}")
    elif steps[endings[0]]["data"].get("category") not in ENDING_CATEGORIES:
        issues.append(f"ending node {endings[0]} is not a chain, agent or engine")
    if _cycle(nodes, edges):
        issues.append("edges form a cycle")
    placed = list(nodes.values())
    for k, a in enumerate(placed):
        for b in placed[k + 1 :]:
            if overlaps(a, b):
                issues.append(f"nodes {a['id']} and {b['id']} overlap")
    return issues
