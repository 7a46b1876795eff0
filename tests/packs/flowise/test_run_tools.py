"""Credentials, updates, file settings and readiness through a real MCP client, against the fake Flowise.

Running chatflows needs the real Flowise: test_run_live.py."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
from mcp.client import Client

from tests.cli_runner import agentloom
from tests.packs.flowise.fake_flowise import FakeFlowise
from tests.packs.flowise.live import API_KEY_PERMISSIONS
from tests.packs.flowise.test_catalog import trim
from tests.packs.flowise.test_tools import host, stored_flow
from tests.packs.flowise.tokens import tokens
from tests.server.clients import call, error

pytestmark = pytest.mark.slow  # every test here takes seconds (docs/development.md)

CHAIN = ["chatOpenAI", "bufferMemory", "conversationChain"]


def credential(name: str, kind: str = "openAIApi") -> dict[str, str]:
    now = "2026-11-27T10:00:00.000Z"
    return {"id": str(uuid.uuid4()), "name": name, "credentialName": kind, "createdDate": now, "updatedDate": now}


def node_data(fake: FakeFlowise, chatflow_id: str, node_id: str) -> dict:
    return next(n["data"] for n in stored_flow(fake, chatflow_id)["nodes"] if n["id"] == node_id)


def test_credentials_are_listed_by_kind_never_with_secrets(
    fake_flowise: FakeFlowise, server_env: dict[str, str]
) -> None:
    fake = trim(fake_flowise)
    mine = {**credential("team OpenAI"), "plainDataObj": {"openAIApiKey": "sk-secret"}}
    fake.credentials = [mine, credential("Claude", "anthropicApi")]
    server_env.update(AGENTLOOM_FLOWISE__URL=fake.url, AGENTLOOM_FLOWISE__API_KEY=fake.api_key)
    listed = agentloom(server_env, "flowise", "credentials", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"id": fake.credentials[1]["id"], "name": "Claude", "kind": "anthropicApi"},
        {"id": mine["id"], "name": "team OpenAI", "kind": "openAIApi"},
    ]
    plain = agentloom(server_env, "flowise", "credentials", "--kind", "openAIApi")
    assert plain.stdout.splitlines() == [f"openAIApi  team OpenAI  {mine['id']}"] and "sk-secret" not in plain.stdout
    none = agentloom(server_env, "flowise", "credentials", "--kind", "pineconeApi")
    assert none.returncode == 0 and none.stdout == "" and "no pineconeApi credential" in none.stderr
    fake.permissions = {p for p in API_KEY_PERMISSIONS if not p.startswith("credentials:")}
    refused = agentloom(server_env, "flowise", "credentials")
    assert refused.returncode == 1 and "credentials:view" in refused.stderr


async def test_the_only_credential_of_a_kind_is_attached_and_said(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    mine = credential("team OpenAI")
    fake.credentials = [mine, credential("Claude", "anthropicApi")]
    async with Client(host(tmp_path, fake).server) as client:
        built = await call(client, "flowise_build_flow", nodes=CHAIN)
        assert built["attached"] == ["team OpenAI → chatOpenAI_0 (the only openAIApi)"], built
        assert "credentials" not in built and "fill" not in built and "issues" not in built, built
        data = node_data(fake, built["chatflow_id"], "chatOpenAI_0")
        assert data["credential"] == data["inputs"]["credential"] == mine["id"]

        fake.credentials.append(credential("my OpenAI"))
        choose = await call(client, "flowise_build_flow", nodes=CHAIN)
        assert choose["credentials"] == ["openAIApi for chatOpenAI_0 (choose: team OpenAI, my OpenAI)"], choose
        named = await call(client, "flowise_build_flow", nodes=CHAIN, credentials=["my openai"])
        assert named["attached"] == ["my OpenAI → chatOpenAI_0"], named
        count = len(fake.chatflows)
        wrong = await error(client, "flowise_build_flow", nodes=CHAIN, credentials=["Claude"])
        assert wrong == "credentials: Claude (anthropicApi) fits no node of this chatflow", wrong
        unknown = await error(client, "flowise_build_flow", nodes=CHAIN, credentials=["prod"])
        assert unknown.startswith("credentials: no credential 'prod'; yours: team OpenAI (openAIApi)"), unknown
        assert len(fake.chatflows) == count  # refused before anything was saved


async def test_a_key_without_credentials_permission_still_builds(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    fake.credentials = [credential("team OpenAI")]
    fake.permissions = {p for p in API_KEY_PERMISSIONS if not p.startswith("credentials:")}
    async with Client(host(tmp_path, fake).server) as client:
        built = await call(client, "flowise_build_flow", nodes=CHAIN)
        assert built["credentials"][0] == "openAIApi for chatOpenAI_0"
        assert "credentials:view" in built["credentials"][1], built
        assert "credentials:view" in await error(client, "flowise_build_flow", nodes=CHAIN, credentials=["team OpenAI"])


async def test_update_changes_settings_name_node_and_credentials(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    async with Client(host(tmp_path, fake).server) as client:
        built = await call(client, "flowise_build_flow", nodes=CHAIN, name="Support bot")
        flow_id = built["chatflow_id"]
        assert built["credentials"] == ["openAIApi for chatOpenAI_0"]
        fake.credentials = [credential("team OpenAI")]
        updated = await call(
            client,
            "flowise_update_chatflow",
            chatflow_id=flow_id,
            name="Support bot v2",
            settings={
                "chatOpenAI_0": {"Model Name": "gpt-4o", "basepath": "http://127.0.0.1:9/v1", "temperature": 0.1}
            },
            swap={"bufferMemory_0": "bufferWindowMemory"},
        )
        assert updated == {
            "chatflow_id": flow_id,
            "name": "Support bot v2",
            "attached": ["team OpenAI → chatOpenAI_0 (the only openAIApi)"],
        }
        flow = stored_flow(fake, flow_id)
        names = sorted(n["data"]["name"] for n in flow["nodes"])
        assert names == ["bufferWindowMemory", "chatOpenAI", "conversationChain"]
        model = node_data(fake, flow_id, "chatOpenAI_0")["inputs"]
        assert (model["modelName"], model["basepath"], model["temperature"]) == ("gpt-4o", "http://127.0.0.1:9/v1", 0.1)
        chain = node_data(fake, flow_id, "conversationChain_0")["inputs"]
        assert chain["memory"] == "{{bufferWindowMemory_0.data.instance}}"
        assert fake.chatflows[flow_id]["name"] == "Support bot v2"

        before = fake.chatflows[flow_id]["flowData"]
        refusals = [
            await error(client, "flowise_update_chatflow", chatflow_id=flow_id),
            await error(client, "flowise_update_chatflow", chatflow_id="not-a-uuid", name="x"),
            await error(client, "flowise_update_chatflow", chatflow_id=str(uuid.uuid4()), name="x"),
            await error(client, "flowise_update_chatflow", chatflow_id=flow_id, swap={"ghost_0": "bufferMemory"}),
            await error(client, "flowise_update_chatflow", chatflow_id=flow_id, swap={"chatOpenAI_0": "calculator"}),
            await error(client, "flowise_update_chatflow", chatflow_id=flow_id, settings={"chatOpenAI_0": {"x": 1}}),
            await error(client, "flowise_update_chatflow", chatflow_id=flow_id, name="x", flowData="{}"),
        ]
        assert refusals[0].startswith("nothing to change"), refusals
        assert "not a chatflow id" in refusals[1] and "not found" in refusals[2].lower(), refusals
        assert "no node 'ghost_0'" in refusals[3] and "swap.chatOpenAI_0" in refusals[4], refusals
        assert "settings.chatOpenAI_0: no input 'x'" in refusals[5] and "flowData" in refusals[6], refusals
        for text in refusals:
            assert tokens(text) < 60, text
        assert fake.chatflows[flow_id]["flowData"] == before  # a refused update changes nothing


async def test_a_file_setting_takes_a_path(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    document = tmp_path / "handbook.pdf"
    document.write_bytes(b"%PDF-1.4\n% not parsed here: the setting carries the bytes as they are\n%%EOF\n")
    nodes = ["pdfFile", "openAIEmbeddings", "memoryVectorStore", "chatOpenAI", "conversationalRetrievalQAChain"]
    async with Client(host(tmp_path, fake).server) as client:
        bare = await call(client, "flowise_build_flow", nodes=nodes)
        assert "pdfFile_0: Pdf File" in bare["fill"], bare
        built = await call(client, "flowise_build_flow", nodes=nodes, settings={"pdfFile": {"Pdf File": str(document)}})
        assert "fill" not in built, built
        value = node_data(fake, built["chatflow_id"], "pdfFile_0")["inputs"]["pdfFile"]
        head, encoded, name = value.split(",")
        assert (head, name) == ("data:application/pdf;base64", "filename:handbook.pdf")
        assert base64.b64decode(encoded) == document.read_bytes()
        missing = await error(
            client, "flowise_build_flow", nodes=nodes, settings={"pdfFile": {"pdfFile": "/no/such.pdf"}}
        )
        assert missing == "settings.pdfFile_0.pdfFile: no file '/no/such.pdf' on this machine; give its full path"
        several = await call(
            client,
            "flowise_build_flow",
            nodes=nodes,
            settings={"pdfFile": {"pdfFile": [str(document), str(document)]}},
        )
        files = json.loads(node_data(fake, several["chatflow_id"], "pdfFile_0")["inputs"]["pdfFile"])
        assert len(files) == 2 and all(f.endswith("filename:handbook.pdf") for f in files)


async def test_test_flow_names_what_blocks_it_briefly(fake_flowise: FakeFlowise, tmp_path: Path) -> None:
    fake = trim(fake_flowise)
    async with Client(host(tmp_path, fake).server) as client:
        built = await call(client, "flowise_build_flow", nodes=["chatOpenAI", "promptTemplate", "llmChain"])
        tested = await call(client, "flowise_test_flow", chatflow_id=built["chatflow_id"])
        assert tested == {"ready": False, "blocks": ["chatOpenAI_0: credential", "promptTemplate_0: Template"]}
        assert tokens(tested) < 100
        assert "not a chatflow id" in await error(client, "flowise_test_flow", chatflow_id="nope")
        assert "question" in await error(client, "flowise_predict", chatflow_id=built["chatflow_id"], question=" ")
