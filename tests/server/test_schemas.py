"""What tools/list says of a tool, said once: compact schemas accept and refuse what pydantic's did."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

import jsonschema
import pytest
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict

from agentloom.server.schemas import (
    clean_description,
    compact_annotations,
    compact_output_schema,
    compact_schema,
)


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    title: str | None = None  # a property called "title" is not pydantic's title


class Tree(BaseModel):
    name: str
    children: list[Tree] = []  # recursive: its $defs entry must stay


class Args(BaseModel):
    name: Annotated[str, Field(description="The name.", min_length=1)]
    inner: Inner
    inners: list[Inner] | None = None
    mode: Literal["a", "b"] | None = None
    level: Literal[1, 2] = 1
    metadata: dict[str, str | int | float | bool] | None = None
    flag: bool = False
    anything: Any = None
    tree: Tree | None = None


class Reply(TypedDict):
    status: Literal["ok", "error"]
    count: int
    message: str | None
    items: list[Inner]
    warning: NotRequired[str]


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


VALUES: list[Any] = [
    {"name": "x", "inner": {"text": "t"}},
    {"name": "x", "inner": {"text": "t", "title": None}, "inners": None, "mode": None, "level": 2},
    {"name": "x", "inner": {"text": "t", "title": "T"}, "inners": [{"text": "u"}], "mode": "b", "flag": True},
    {"name": "x", "inner": {"text": "t"}, "metadata": {"a": 1, "b": 1.5, "c": True, "d": "s"}, "anything": [1]},
    {"name": "x", "inner": {"text": "t"}, "tree": {"name": "r", "children": [{"name": "c", "children": []}]}},
    {"name": "", "inner": {"text": "t"}},  # too short
    {"name": "x", "inner": {"text": "t", "bogus": 1}},  # extra key in a forbidding model
    {"name": "x", "inner": {"text": 3}},
    {"name": "x", "inner": {"text": "t"}, "mode": "c"},
    {"name": "x", "inner": {"text": "t"}, "level": 3},
    {"name": "x", "inner": {"text": "t"}, "metadata": {"a": [1]}},
    {"name": "x", "inner": {"text": "t"}, "inners": "no"},
    {"name": "x", "inner": {"text": "t"}, "tree": {"name": "r", "children": [{"children": []}]}},
    {"inner": {"text": "t"}},
]


@pytest.mark.parametrize("value", VALUES)
def test_a_compact_input_schema_accepts_exactly_what_pydantic_s_does(value: Any) -> None:
    full = Args.model_json_schema()
    assert _valid(compact_schema(full), value) == _valid(full, value)  # type: ignore[arg-type]


def test_a_compact_schema_drops_titles_null_branches_and_one_use_defs() -> None:
    lean = compact_schema(Args.model_json_schema())
    assert lean is not None
    text = str(lean)
    assert "'title': 'Name'" not in text and "'title': 'Args'" not in text
    assert lean["properties"]["inner"] == {"$ref": "#/$defs/Inner"}  # used twice: defined once
    assert lean["$defs"]["Inner"]["properties"]["title"] == {"type": ["string", "null"]}
    assert lean["properties"]["mode"] == {"enum": ["a", "b", None]}
    assert lean["properties"]["level"] == {"default": 1, "enum": [1, 2]}
    assert lean["properties"]["metadata"]["additionalProperties"] == {"type": ["string", "number", "boolean"]}
    assert "default" not in lean["properties"]["inners"]  # not given means null
    assert lean["properties"]["name"]["description"] == "The name."
    assert lean["properties"]["flag"] == {"type": "boolean"}  # a flag is off unless given
    assert set(lean["$defs"]) == {"Inner", "Tree"}  # used twice, and recursive
    once = compact_schema(Reply.__annotations__ and TypeAdapter(Reply).json_schema())
    assert once is not None and "$defs" not in once and "properties" in once["properties"]["items"]["items"]
    assert compact_schema(None) is None


def test_a_tool_without_arguments_lists_mcp_s_form_for_it() -> None:
    assert compact_schema({"type": "object", "properties": {}, "additionalProperties": False}) == {
        "type": "object",
        "additionalProperties": False,
    }


def test_an_output_schema_lists_keys_and_types_and_still_matches_every_reply() -> None:
    full = TypeAdapter(Reply).json_schema()
    lean = compact_output_schema(full)
    assert lean is not None and lean["type"] == "object" and "required" not in lean
    assert lean["properties"]["items"]["items"]["properties"]["text"] == {"type": "string"}
    replies = [
        {"status": "ok", "count": 1, "message": None, "items": [{"text": "a"}]},
        {"status": "error", "count": 0, "message": "m", "items": [], "warning": "w"},
    ]
    for reply in replies:
        assert _valid(full, reply) and _valid(lean, reply)
    assert not _valid(lean, {"status": "maybe"}) and not _valid(lean, {"count": "1"})
    assert compact_output_schema(None) is None


def test_annotations_keep_what_differs_from_the_specification_and_what_makes_a_client_careful() -> None:
    def compact(**hints: bool) -> dict[str, Any]:
        result = compact_annotations(ToolAnnotations(**hints))
        return result.model_dump(by_alias=True, exclude_none=True) if result else {}

    assert compact(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False) == {
        "readOnlyHint": True,
        "openWorldHint": False,
    }
    assert compact(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True) == {
        "readOnlyHint": True,
    }
    assert compact(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False) == {
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    # The specification's defaults, but a client reading a missing hint as false would not ask first.
    assert compact(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True) == {
        "destructiveHint": True,
        "openWorldHint": True,
    }
    assert compact_annotations(None) is None


def test_a_description_loses_the_code_s_indentation_and_wrapping_but_not_its_lists() -> None:
    doc = """Search the notes: best first.
        Results hold the text.

        - `query`: what to find
        - `limit`: at most this many
          (1-10)
        """
    assert clean_description(doc) == (
        "Search the notes: best first. Results hold the text.\n\n- `query`: what to find\n"
        "- `limit`: at most this many\n  (1-10)"
    )
    assert clean_description(None) == ""
