"""The refusal messages a model reads (server/messages.py), word for word: each names the
argument, the problem and the fix, and never carries pydantic's dump."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from agentloom.server.messages import argument_errors, describe_type, nearest, unknown_tool, validation_summary


class Search(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str
    limit: int = 5
    tags: list[str] = []


class Checked(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def _lower(cls, value: str) -> str:
        if value != value.lower():
            raise ValueError("Must be lower case; write it as " + value.lower())
        if value == "blank":
            raise ValueError("")
        return value


def error_of(model: type[BaseModel], data: Any) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


SCHEMA = Search.model_json_schema()


def test_nearest_puts_close_spellings_first_then_names_sharing_a_stem() -> None:
    tools = ["vector_search", "vector_add", "docs_search", "vectors"]
    assert nearest("vector_find", tools) == ["vector_add", "vectors", "vector_search"]
    assert nearest("vector_find", tools, n=1) == ["vector_add"]
    assert nearest("serch_docs", ["search_docs", "list_docsets", "search_skills"]) == [
        "search_docs",
        "search_skills",
        "list_docsets",
    ]
    assert nearest("docs", ["docs_search", "search"]) == ["docs_search"]  # contained in a name
    assert nearest("flowise_search_nodes_x", ["search_nodes"]) == ["search_nodes"]  # a name contained in it
    assert nearest("zzz", ["a_b", "zzzz_q"]) == ["zzzz_q"]
    assert nearest("zzz", ["a_b"]) == []


def test_unknown_tool_suggests_and_counts() -> None:
    assert unknown_tool("serch_docs", ["search_docs", "list_docsets"]) == (
        "Unknown tool 'serch_docs'. Did you mean `search_docs`, `list_docsets`? "
        "Call tools/list for every tool; this server has 2."
    )
    assert (
        unknown_tool("zzz", ["search_docs"]) == "Unknown tool 'zzz'. Call tools/list for every tool; this server has 1."
    )


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"enum": ["a", 1]}, "one of 'a', 1"),
        ({"enum": ["a", None]}, "one of 'a', null"),  # tools/list's form of an optional enum
        ({"type": ["array", "null"], "items": {"type": "string"}}, "an array of strings or null"),
        ({"const": "x"}, "'x'"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "a string or null"),
        ({"oneOf": [{"type": "integer"}, {"type": "integer"}]}, "an integer"),
        ({"type": ["string", "integer", "weird"]}, "a string or an integer or weird"),
        ({"type": "array", "items": {"type": "integer"}}, "an array of integers"),
        ({"type": "array", "items": {"type": "object"}}, "an array of objects"),
        ({"type": "array", "items": {"type": "boolean"}}, "an array of true or falses"),
        ({"type": "array", "items": {}}, "an array"),
        ({"type": "array"}, "an array"),
        ({"type": "number"}, "a number"),
        ({"type": "boolean"}, "true or false"),
        ({"type": "object"}, "an object"),
        ({"type": "null"}, "null"),
        ({"type": "mystery"}, "a JSON value"),
        ({}, "a JSON value"),
    ],
)
def test_describe_type_in_words(schema: dict[str, Any], words: str) -> None:
    assert describe_type(schema) == words


def test_unknown_and_missing_arguments_with_the_fix() -> None:
    error = error_of(Search, {"qurey": "x", "limt": 3, "extra": 1})
    assert argument_errors("search", SCHEMA, error) == (
        "search does not take `qurey`, `limt`, `extra`. Accepted arguments: query, limit, tags. "
        "Did you mean `qurey` -> `query`? `limt` -> `limit`?\n"
        "search is missing the required argument `query` (a string)."
    )


def test_two_missing_arguments_are_plural() -> None:
    class Two(BaseModel):
        a: int
        b: list[int]

    assert argument_errors("pair", Two.model_json_schema(), error_of(Two, {})) == (
        "pair is missing the required arguments `a` (an integer), `b` (an array of integers)."
    )


def test_wrong_values_say_what_was_expected_and_what_came() -> None:
    error = error_of(Search, {"query": 3, "limit": "many", "tags": ["a", 2]})
    assert argument_errors("search", SCHEMA, error) == (
        "search: `query`: expected a string, got 3; `limit`: expected an integer, got 'many'; "
        "`tags.1`: input should be a valid string (got 2)."
    )


def test_arguments_the_server_found_unknown_itself() -> None:
    assert (
        argument_errors("search", SCHEMA, None, ["oops"])
        == "search does not take `oops`. Accepted arguments: query, limit, tags."
    )
    assert argument_errors("ping", {}, None, ["x"]) == "ping does not take `x`. Accepted arguments: none."
    assert argument_errors("search", {}, None) == "search: invalid arguments."


def test_a_validator_message_loses_pydantic_prefix_and_capital() -> None:
    error = error_of(Checked, {"name": "Bob"})
    assert argument_errors("greet", Checked.model_json_schema(), error) == (
        "greet: `name`: must be lower case; write it as bob (got 'Bob')."
    )
    assert validation_summary(error_of(Checked, {"name": "blank"})) == "`name`: invalid value (got 'blank')"


def test_long_values_are_cut_to_sixty_characters() -> None:
    error = error_of(Search, {"query": "q", "limit": "x" * 100})
    assert argument_errors("search", SCHEMA, error) == f"search: `limit`: expected an integer, got '{'x' * 56}...."
    exact = error_of(Search, {"query": "q", "limit": "y" * 58})  # repr is 60 characters: kept whole
    assert argument_errors("search", SCHEMA, exact) == f"search: `limit`: expected an integer, got '{'y' * 58}'."


def test_validation_summary_names_each_place_and_stops_at_five() -> None:
    error = error_of(Search, {"query": 3, "limit": "many", "tags": ["a", 2]})
    assert validation_summary(error) == (
        "`query`: input should be a valid string (got 3); "
        "`limit`: input should be a valid integer, unable to parse string as an integer (got 'many'); "
        "`tags.1`: input should be a valid string (got 2)"
    )
    many = error_of(Search, {"query": 1, "tags": [1, 2, 3, 4, 5, 6]})
    assert validation_summary(many).count("`") == 10  # five places, each in backticks
    with pytest.raises(ValidationError) as whole:  # an error about the whole value: named by its title
        TypeAdapter(int).validate_python("x")
    assert (
        validation_summary(whole.value)
        == "`int`: input should be a valid integer, unable to parse string as an integer (got 'x')"
    )


def test_nearest_offers_three_names_unless_told_otherwise() -> None:
    tools = ["vector_a", "vector_b", "vector_c", "vector_d"]  # all four are close spellings of vector_find
    assert nearest("vector_find", tools) == ["vector_d", "vector_c", "vector_b"]
    assert unknown_tool("vector_find", tools) == (
        "Unknown tool 'vector_find'. Did you mean `vector_d`, `vector_c`, `vector_b`? "
        "Call tools/list for every tool; this server has 4."
    )
    assert nearest("abcd", ["abce", "abcf", "abcg", "abch"], n=4) == [
        "abch",
        "abcg",
        "abcf",
        "abce",
    ]  # four close ones, all kept


def test_nearest_relates_names_by_stem_or_containment_even_when_not_close() -> None:
    assert nearest("db_x", ["db_query_everything", "cache_x"]) == ["db_query_everything"]  # same stem, ratio 0.26
    assert nearest("flowise_search_nodes_extra_long", ["nodes"]) == ["nodes"]  # contained in it, other stem
    assert nearest("x_docs", ["mega_x_docs_lookup_table"]) == ["mega_x_docs_lookup_table"]  # contains it, other stem


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array", "items": {"type": "string"}}, "an array of strings"),
        ({"type": "array", "items": {"type": "number"}}, "an array of numbers"),
    ],
)
def test_an_array_of_a_type_with_an_a_loses_the_article(schema: dict[str, Any], words: str) -> None:
    assert describe_type(schema) == words


def test_an_error_about_the_whole_arguments_object_is_named_arguments() -> None:
    error = error_of(Search, "oops")  # loc is empty: the value itself is wrong, not one argument
    assert argument_errors("search", SCHEMA, error) == (
        "search: `arguments`: input should be a valid dictionary or instance of Search (got 'oops')."
    )


def test_an_argument_the_schema_does_not_describe_is_still_named_with_a_json_value() -> None:
    assert (
        argument_errors("search", {}, error_of(Search, {"query": 3}))
        == "search: `query`: expected a JSON value, got 3."
    )
    assert argument_errors("search", {"type": "object"}, error_of(Search, {})) == (
        "search is missing the required argument `query` (a JSON value)."
    )


def test_a_value_whose_repr_is_sixty_one_characters_is_cut() -> None:
    error = error_of(Search, {"query": "q", "limit": "z" * 59})  # repr is 61 characters
    assert argument_errors("search", SCHEMA, error) == f"search: `limit`: expected an integer, got '{'z' * 56}...."


class Unions(BaseModel):
    metadata: dict[str, str | int | float | bool] | None = None
    scores: list[int | str] = []
    either: int | bool = 0
    limited: Annotated[int, Field(ge=1)] | Annotated[str, Field(min_length=2)] = 1
    inner: Search | None = None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"metadata": {"a": {"b": 1}}},
            "`metadata.a`: nested objects are not allowed; values must be strings, numbers or booleans",
        ),
        ({"metadata": {"a": None}}, "`metadata.a`: null is not allowed; values must be strings, numbers or booleans"),
        ({"scores": [1, [2]]}, "`scores.1`: nested arrays are not allowed; items must be integers or strings"),
        ({"either": {}}, "`either`: objects are not allowed; expected an integer or true or false"),
        ({"either": "abc"}, "`either`: expected an integer or true or false, got 'abc'"),
        # Not only "not this type": the limit is what the caller needs, at the value's place.
        ({"limited": 0}, "`limited`: input should be greater than or equal to 1 (got 0)"),
        (
            {"scores": [1.5]},
            "`scores.0`: input should be a valid integer, got a number with a fractional part (got 1.5)",
        ),
        ({"metadata": "x"}, "`metadata`: expected an object or null, got 'x'"),
    ],
)
def test_a_value_fitting_no_type_of_a_union_is_one_problem(data: dict[str, Any], message: str) -> None:
    assert argument_errors("t", Unions.model_json_schema(), error_of(Unions, data)) == f"t: {message}."


def test_union_errors_inside_a_referenced_model_are_found_through_its_definition() -> None:
    class Outer(BaseModel):
        items: list[Unions]

    error = error_of(Outer, {"items": [{"metadata": {"k": [1]}}]})
    assert argument_errors("t", Outer.model_json_schema(), error) == (
        "t: `items.0.metadata.k`: nested arrays are not allowed; values must be strings, numbers or booleans."
    )
