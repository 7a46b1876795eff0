"""Credentials: which of the user's Flowise credentials a chatflow's nodes get (credentials.py), on real node
definitions of Flowise 3.1.2."""

from __future__ import annotations

from typing import Any

import pytest

from agentloom.packs.flowise.credentials import INPUTS, Credential, attach, needs, resolve
from agentloom.packs.flowise.planner import PlanError, plan_flow

OPENAI = Credential("0b7c…1", "team OpenAI", "openAIApi")
OPENAI_2 = Credential("0b7c…2", "my OpenAI", "openAIApi")
ANTHROPIC = Credential("9f1e…3", "Claude", "anthropicApi")


@pytest.fixture
def rag(catalog: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Chat model and embeddings both need an openAIApi credential; the rest need none."""
    return plan_flow(["textFile", "openAIEmbeddings", "memoryVectorStore", "chatOpenAI", "retrievalQAChain"], catalog)


def chosen(flow: dict[str, Any]) -> dict[str, str]:
    return {n["id"]: n["data"]["credential"] for n in flow["nodes"] if isinstance(n["data"].get("credential"), str)}


def test_the_only_credential_of_a_kind_is_used_and_said(rag: dict[str, Any], catalog: dict[str, Any]) -> None:
    assert [(n["id"], kinds) for n, kinds in needs(rag, catalog)] == [
        ("openAIEmbeddings_0", ["openAIApi"]),
        ("chatOpenAI_0", ["openAIApi"]),
    ]
    result = attach(rag, catalog, [OPENAI, ANTHROPIC], [])
    assert result.attached == ["team OpenAI → openAIEmbeddings_0, chatOpenAI_0 (the only openAIApi)"]
    assert result.missing == []
    assert chosen(rag) == {"openAIEmbeddings_0": OPENAI.id, "chatOpenAI_0": OPENAI.id}
    node = next(n for n in rag["nodes"] if n["id"] == "chatOpenAI_0")
    assert [node["data"]["inputs"][k] for k in INPUTS] == [OPENAI.id, OPENAI.id]  # where validation and the UI look


def test_several_of_a_kind_are_offered_not_guessed(rag: dict[str, Any], catalog: dict[str, Any]) -> None:
    result = attach(rag, catalog, [OPENAI, OPENAI_2], [])
    assert result.attached == []
    assert result.missing == [
        "openAIApi for openAIEmbeddings_0 (choose: team OpenAI, my OpenAI)",
        "openAIApi for chatOpenAI_0 (choose: team OpenAI, my OpenAI)",
    ]
    assert chosen(rag) == {}
    named = attach(rag, catalog, [OPENAI, OPENAI_2], resolve(["MY openai"], [OPENAI, OPENAI_2], None))
    assert named.attached == ["my OpenAI → openAIEmbeddings_0, chatOpenAI_0"] and named.missing == []


def test_none_yet_names_the_kind(rag: dict[str, Any], catalog: dict[str, Any]) -> None:
    assert attach(rag, catalog, [], []).missing == ["openAIApi for openAIEmbeddings_0", "openAIApi for chatOpenAI_0"]
    assert attach(rag, catalog, None, []).missing == ["openAIApi for openAIEmbeddings_0", "openAIApi for chatOpenAI_0"]


def test_a_credential_already_picked_stays_unless_one_is_named(rag: dict[str, Any], catalog: dict[str, Any]) -> None:
    attach(rag, catalog, [OPENAI_2], [])
    again = attach(rag, catalog, [OPENAI, OPENAI_2], [])
    assert again.attached == [] and again.missing == [] and set(chosen(rag).values()) == {OPENAI_2.id}
    attach(rag, catalog, [OPENAI, OPENAI_2], [OPENAI])
    assert set(chosen(rag).values()) == {OPENAI.id}


def test_refusals_name_the_credential_and_the_choices(rag: dict[str, Any], catalog: dict[str, Any]) -> None:
    with pytest.raises(PlanError) as unknown:
        resolve(["prod key"], [OPENAI, ANTHROPIC], None)
    assert (
        str(unknown.value)
        == "credentials: no credential 'prod key'; yours: team OpenAI (openAIApi), Claude (anthropicApi)"
    )
    with pytest.raises(PlanError) as none_yet:
        resolve(["prod key"], [], None)
    assert str(none_yet.value).endswith("yours: none yet (add one in Flowise)")
    with pytest.raises(PlanError) as unlisted:
        resolve(["prod key"], None, "give the API key the credentials:view permission")
    assert "credentials:view" in str(unlisted.value)
    with pytest.raises(PlanError) as unfit:
        attach(rag, catalog, [OPENAI, ANTHROPIC], [ANTHROPIC])
    assert str(unfit.value) == "credentials: Claude (anthropicApi) fits no node of this chatflow"
    with pytest.raises(PlanError) as two:
        attach(rag, catalog, [OPENAI, OPENAI_2], [OPENAI, OPENAI_2])
    assert str(two.value) == "credentials: team OpenAI, my OpenAI all fit openAIEmbeddings_0; give one"
    assert resolve([OPENAI.id], [OPENAI], None) == [OPENAI]  # an id works as well as a name


def test_listed_records_keep_no_secret() -> None:
    records = [
        {"id": "a1", "name": "k", "credentialName": "openAIApi", "createdDate": "2026-11-27"},
        {"name": "no id"},
    ]
    assert Credential.listed(records) == [Credential("a1", "k", "openAIApi")]
