"""Typed shapes of Stitch: the React Flow graph, statuses, and the worker's callback.

The request shapes carry in their JSON Schema every rule of the graph and of Stitch's values
that JSON Schema can say (what a client or a fuzzer can know before sending): no NUL in any
string or key (:mod:`values`), the node id alphabet (:mod:`ids`), at least one node, a Worker's
``data.webhookUrl`` and its ``timeoutSeconds`` and ``retry``. The checks themselves run in
:mod:`values` and :mod:`graph`, with messages that name the fix; the rules a schema cannot say
are listed in ``graph.BEYOND_SCHEMA``.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, ValidationInfo, WithJsonSchema, field_validator

from agentloom.stitch.ids import shown

NO_NUL = "^[^\\u0000]*$"
# ids.node_id_problem: the URL-safe alphabet, not dots alone.
NODE_ID_PATTERN = "^(?!\\.+$)[A-Za-z0-9_.:-]+$"
HTTP_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]+"  # graph._is_http_url: a scheme and a host
NODE_ID_MAX = 200
EDGE_ID_MAX = 500  # React Flow names an edge after both its nodes and their handles
JSON_VALUE_REF = {"$ref": "#/components/schemas/JsonValue"}
# Any JSON value that values.check accepts (its depth limit is said in the description only).
JSON_VALUE_SCHEMA: dict[str, Any] = {
    "description": "Any JSON value. Strings and object keys hold no NUL character (\\u0000) and no unpaired "
    "surrogate, and values nest at most 64 levels deep: PostgreSQL could not store the one and no "
    "answer could carry the others (the server names any of them in a 422).",
    "anyOf": [
        {"type": "string", "pattern": NO_NUL},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": JSON_VALUE_REF},
        {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": JSON_VALUE_REF},
    ],
}
# pydantic cannot point at a schema it did not make: fields say this marker, and api.py's
# OpenAPI replaces each with JSON_VALUE_REF and adds JSON_VALUE_SCHEMA to the components.
JSON_VALUE_MARK = {"x-stitch-json-value": True}
JsonValue = Annotated[Any, WithJsonSchema(JSON_VALUE_MARK)]
EXTRA_KEYS: dict[str, Any] = {"propertyNames": {"pattern": NO_NUL}, "additionalProperties": JSON_VALUE_MARK}


# The same for a graph the API reads as JSON (checks.py) yet describes with the Graph schema.
GRAPH_MARK = {"x-stitch-graph": True}
GRAPH_REF = {"$ref": "#/components/schemas/Graph"}


def with_json_value(schema: Any) -> Any:
    """``schema`` (an OpenAPI document or part) with every JSON_VALUE_MARK pointing at JsonValue
    and every GRAPH_MARK at Graph."""
    if isinstance(schema, dict):
        for mark, ref in ((JSON_VALUE_MARK, JSON_VALUE_REF), (GRAPH_MARK, GRAPH_REF)):
            if any(schema.get(key) for key in mark):  # beside a title, a default or a description: kept (OpenAPI 3.1)
                return {**ref, **{k: v for k, v in schema.items() if k not in mark}}
        return {key: with_json_value(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [with_json_value(item) for item in schema]
    return schema


def text_field(**constraints: Any) -> Any:
    """A request string field: its constraints, and no NUL said in the schema (values.check refuses it)."""
    return Field(json_schema_extra={"pattern": NO_NUL}, **constraints)


class NodeType(StrEnum):
    WORKER = "Worker"
    UX = "UX"
    SPLITTER = "Splitter"
    COLLECTOR = "Collector"


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    WAITING_FOR_USER = "waiting_for_user"
    RETRYING = "retrying"  # failed; an automatic retry (data.retry) is scheduled
    CANCELLED = "cancelled"


class Position(BaseModel):
    model_config = ConfigDict(json_schema_extra=EXTRA_KEYS)  # other keys are ignored, but must be Stitch JSON
    # Strict: JSON numbers only; false or "1" would otherwise be stored as 0.0 or 1.0.
    x: StrictFloat = 0
    y: StrictFloat = 0


def position_problem(node_id: object, position: Any) -> str | None:
    """Why a node's raw ``position`` is not two JSON numbers, naming the node (or None)."""
    if not isinstance(position, dict):
        return None
    for axis in ("x", "y"):
        value = position.get(axis, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return (
                f"node {shown(node_id)}: position.{axis} must be a number, "
                f"not {json.dumps(value, ensure_ascii=True)[:40]}; send the canvas coordinate as a JSON number"
            )
    return None


# An input schema as far as the API's schema says it (graph.BEYOND_SCHEMA: a JSON Schema's own
# rules are checked when the flow is saved, by input_schemas.schema_problem).
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"const": "object"}},
    **EXTRA_KEYS,  # every other keyword is Stitch JSON (no NUL in its keys, at any depth)
    "description": "A JSON Schema (Draft 2020-12) of an object, every $ref inside it: what the value must "
    "hold. The console draws a form from it (docs/stitch.md, input schemas).",
}


# What a node's data must hold, by type (graph._config_problems and _saving_problems).
_WORKER_DATA: dict[str, Any] = {
    "type": "object",
    "required": ["webhookUrl"],
    "properties": {
        "webhookUrl": {
            "type": "string",
            "pattern": HTTP_URL_PATTERN,
            "description": "Where the node's webhook is sent (the server's webhook policy applies).",
        },
        "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0, "description": "Fail an attempt after this long."},
        "retry": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["maxAttempts"],
                    "additionalProperties": False,
                    "properties": {
                        "maxAttempts": {"type": "integer", "minimum": 1},
                        "backoffSeconds": {"type": "number", "minimum": 0},
                        "backoffFactor": {"type": "number", "minimum": 1},
                    },
                },
            ],
            "description": "Retry failed attempts automatically.",
        },
    },
}
_NODE_RULES: list[dict[str, Any]] = [
    {
        "if": {"properties": {"type": {"const": "UX"}}},
        "then": {"properties": {"data": {"properties": {"inputSchema": INPUT_SCHEMA}}}},
    },
    {
        "if": {"properties": {"type": {"const": "Worker"}}},
        "then": {"required": ["data"], "properties": {"data": _WORKER_DATA}},
        "else": {
            "properties": {"data": {"not": {"anyOf": [{"required": ["timeoutSeconds"]}, {"required": ["retry"]}]}}}
        },
    },
    {
        "if": {"properties": {"type": {"const": "Splitter"}}},
        "then": {"properties": {"data": {"properties": {"arrayPath": {"type": "string", "pattern": NO_NUL}}}}},
    },
]


_NODE_SCHEMA: dict[str, Any] = {**EXTRA_KEYS, "allOf": _NODE_RULES}


class StitchNode(BaseModel):
    """A React Flow node. Unknown React Flow keys (width, selected, ...) are kept."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_NODE_SCHEMA)

    id: str = Field(min_length=1, max_length=NODE_ID_MAX, json_schema_extra={"pattern": NODE_ID_PATTERN})
    type: NodeType
    position: Position = Field(default_factory=Position)
    # NodeConfig: webhookUrl, arrayPath, ...
    data: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"propertyNames": {"pattern": NO_NUL}})

    @field_validator("position", mode="before")
    @classmethod
    def _position_is_numbers(cls, position: Any, info: ValidationInfo) -> Any:
        problem = position_problem(info.data.get("id"), position)
        if problem:
            raise ValueError(problem)
        return position


class StitchEdge(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, json_schema_extra=EXTRA_KEYS)
    id: str = text_field(min_length=1, max_length=EDGE_ID_MAX)
    source: str = text_field(max_length=NODE_ID_MAX)  # a node's id
    target: str = text_field(max_length=NODE_ID_MAX)
    sourceHandle: str | None = text_field(default=None)
    targetHandle: str | None = text_field(default=None)


def _graph_schema(schema: dict[str, Any]) -> None:
    schema.update(EXTRA_KEYS)
    schema["properties"]["inputSchema"] = {
        **INPUT_SCHEMA,
        "description": "What a run's input must hold (POST .../runs refuses any other): " + INPUT_SCHEMA["description"],
    }


class Graph(BaseModel):
    """A React Flow graph. Every other key (viewport, ...) is kept as sent."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_graph_schema)
    # At least one node: said in the schema, checked by graph.analyse (its message names the fix).
    nodes: list[StitchNode] = Field(json_schema_extra={"minItems": 1})
    edges: list[StitchEdge] = Field(default_factory=list)


RunStatus = Literal["running", "waiting_for_user", "completed", "failed", "cancelled"]


class Callback(BaseModel):
    """What a worker posts back to its callback URL."""

    model_config = ConfigDict(json_schema_extra=EXTRA_KEYS)  # other keys are ignored, but must be Stitch JSON
    status: Literal["completed", "failed"]
    output: JsonValue = None
    error: str | None = text_field(default=None)
