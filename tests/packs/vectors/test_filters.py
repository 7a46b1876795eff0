from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentloom.core.errors import AgentloomError
from agentloom.packs.vectors.filters import parse_filter


def test_equality_operators_and_and() -> None:
    assert parse_filter({"a": 1}).where == {"a": {"$eq": 1}}
    plan = parse_filter({"a": "x", "b": {"$gte": 2, "$lt": 5}})
    assert plan.where == {"$and": [{"a": {"$eq": "x"}}, {"b": {"$gte": 2}}, {"b": {"$lt": 5}}]}
    nested = parse_filter({"$and": [{"a": {"$in": [1, 2]}}, {"$and": [{"b": {"$ne": False}}]}]})
    assert nested.where == {"$and": [{"a": {"$in": [1, 2]}}, {"b": {"$ne": False}}]}
    assert parse_filter(None).where is None and parse_filter({}).where is None


def test_contains_on_metadata_and_document() -> None:
    plan = parse_filter({"tags": {"$contains": "ml"}, "year": 2020}, document_contains="neural")
    assert plan.where == {"year": {"$eq": 2020}}
    assert plan.substrings == (("tags", "ml"),) and plan.document_contains == "neural"
    assert plan.matches({"tags": "ml, nlp"}) and not plan.matches({"tags": "nlp"}) and not plan.matches({})
    assert not plan.matches({"tags": 3})


def test_timestamps_accept_iso_dates() -> None:
    plan = parse_filter({"created_at": {"$gte": "2026-01-01", "$lt": "2026-02-01T00:00:00Z"}})
    first = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert plan.where == {
        "$and": [{"created_at": {"$gte": first}}, {"created_at": {"$lt": datetime(2026, 2, 1, tzinfo=UTC).timestamp()}}]
    }


def test_or_passes_through_but_not_with_contains() -> None:
    assert parse_filter({"$or": [{"a": 1}, {"b": 2}]}).where == {"$or": [{"a": {"$eq": 1}}, {"b": {"$eq": 2}}]}
    with pytest.raises(AgentloomError, match=r"\$contains cannot be used inside \$or"):
        parse_filter({"$or": [{"a": {"$contains": "x"}}, {"b": 2}]})


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"a": {"$between": [1, 2]}}, "unknown operator '$between'"),
        ({"a": {"$gt": "high"}}, "ranges compare numbers"),
        ({"a": {"$in": []}}, "non-empty list"),
        ({"a": [1, 2]}, "must be a string, number or boolean"),
        ({"$xor": []}, "unknown operator"),
        ({"created_at": {"$gte": "yesterday"}}, "not an ISO date"),
        ({"a": {}}, "empty operator object"),
        ({"$and": "a"}, "non-empty list of filters"),
    ],
)
def test_malformed_filters_show_the_accepted_form(bad: dict, fragment: str) -> None:
    with pytest.raises(AgentloomError) as err:
        parse_filter(bad)
    assert fragment in str(err.value) and "accepted:" in str(err.value) and '{"$and": [filter, ...]}' in str(err.value)
