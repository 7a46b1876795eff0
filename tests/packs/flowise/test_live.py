"""The flowise pack against a real Flowise 3.1.2 (scripts/flowise-test-server.sh), through a real MCP client."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from mcp.client import Client

from agentloom.core.settings import Settings
from agentloom.server.host import Host
from tests.packs.flowise.test_tools import FLOWISE_EP
from tests.server.clients import call

pytestmark = pytest.mark.slow
CREDENTIALS = {"Credential is required", "Connect Credential is required"}
LACKING = {"csv-agent": "csvAgent", "react-agent": "reactAgentChat"}  # template nodes 3.1.2 fails to load


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("flowise-live")


def served(data_dir: Path, live: tuple[str, str]) -> Host:
    url, key = live
    settings = Settings(data_dir=data_dir, packs=["flowise"], pack_settings={"flowise": {"url": url, "api_key": key}})
    return Host(settings, [FLOWISE_EP])


def validation(live: tuple[str, str], chatflow_id: str) -> list[dict]:
    url, key = live
    answer = httpx.get(f"{url}/api/v1/validation/{chatflow_id}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    answer.raise_for_status()
    return answer.json()


def stored(live: tuple[str, str], chatflow_id: str) -> dict:
    url, key = live
    answer = httpx.get(f"{url}/api/v1/chatflows/{chatflow_id}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    answer.raise_for_status()
    return json.loads(answer.json()["flowData"])


@pytest.mark.timeout(900)  # 24 chatflows created, validated and deleted on the real server: minutes on a busy machine
async def test_every_marketplace_template_by_id(live_flowise: tuple[str, str], data_dir: Path) -> None:
    async with Client(served(data_dir, live_flowise).server) as client:
        refreshed = await call(client, "flowise_refresh_catalog", force=True)
        assert refreshed["nodes"] == 297 and refreshed["templates"] == 24 and refreshed["server_version"] == "3.1.2"
        found = await call(client, "flowise_search_templates", query="chatbot that remembers the conversation", limit=5)
        assert "conversation-chain" in [t["template_id"] for t in found["results"]]
        templates = sorted(json.loads((data_dir / "flowise" / "catalog.json").read_text())["templates"])
        assert len(templates) == 24
        for template_id in templates:
            built = await call(client, "flowise_build_flow", template_id=template_id)
            flow = stored(live_flowise, built["chatflow_id"])
            assert flow["nodes"] and not any(n["data"]["name"] == "stickyNote" for n in flow["nodes"])
            for node in validation(live_flowise, built["chatflow_id"]):
                for issue in node["issues"]:
                    # Flowise reports credentials, settings only the user can give (a file, an index name),
                    # and, for the two templates using a node 3.1.2 cannot load, that node.
                    assert issue in CREDENTIALS or issue.endswith(" is required"), (template_id, node)
            if template_id in LACKING:
                assert built["issues"][0] == f"not on this Flowise: {LACKING[template_id]}", built
            else:
                assert "issues" not in built, (template_id, built)
            await call(client, "flowise_delete_chatflow", id=built["chatflow_id"])


async def test_build_from_node_names_and_customise(live_flowise: tuple[str, str], data_dir: Path) -> None:
    async with Client(served(data_dir, live_flowise).server) as client:
        await call(client, "flowise_refresh_catalog")  # fresh from the previous test, or fetched now
        rag = await call(
            client,
            "flowise_build_flow",
            name="PDF QnA with memory",
            nodes=[
                "pdfFile",
                "recursiveCharacterTextSplitter",
                "openAIEmbeddings",
                "memoryVectorStore",
                "chatOpenAI",
                "bufferMemory",
                "conversationalRetrievalQAChain",
            ],
        )
        assert "issues" not in rag, rag
        assert rag["fill"] == ["pdfFile_0: Pdf File"], rag  # the file to upload: only the user has it
        edges = {(e["source"], e["target"]) for e in stored(live_flowise, rag["chatflow_id"])["edges"]}
        assert ("memoryVectorStore_0", "conversationalRetrievalQAChain_0") in edges
        assert ("openAIEmbeddings_0", "memoryVectorStore_0") in edges
        assert ("recursiveCharacterTextSplitter_0", "pdfFile_0") in edges
        issues = [i for n in validation(live_flowise, rag["chatflow_id"]) for i in n["issues"] if i not in CREDENTIALS]
        assert issues == ["Pdf File is required"]

        agent = await call(
            client,
            "flowise_build_flow",
            nodes=["chatOpenAI", "calculator", "currentDateTime", "bufferMemory", "toolAgent"],
        )
        assert "issues" not in agent and "fill" not in agent, agent
        tools = next(n for n in stored(live_flowise, agent["chatflow_id"])["nodes"] if n["id"] == "toolAgent_0")
        assert sorted(tools["data"]["inputs"]["tools"]) == [
            "{{calculator_0.data.instance}}",
            "{{currentDateTime_0.data.instance}}",
        ]

        custom = await call(
            client,
            "flowise_build_flow",
            template_id="conversation-chain",
            model="chatAnthropic",
            memory_type="bufferWindowMemory",
            temperature=0.3,
        )
        assert "issues" not in custom, custom
        assert custom["credentials"] == ["anthropicApi for chatAnthropic_0"]
        flow = stored(live_flowise, custom["chatflow_id"])
        names = sorted(n["data"]["name"] for n in flow["nodes"])
        assert names == ["bufferWindowMemory", "chatAnthropic", "conversationChain"]
        model = next(n for n in flow["nodes"] if n["data"]["name"] == "chatAnthropic")
        assert model["data"]["inputs"]["temperature"] == 0.3

        listed = await call(client, "flowise_list_chatflows")
        mine = {rag["chatflow_id"], agent["chatflow_id"], custom["chatflow_id"]}
        assert mine <= {c["id"] for c in listed["chatflows"]}
        for chatflow_id in mine:
            await call(client, "flowise_delete_chatflow", id=chatflow_id)
        assert not mine & {c["id"] for c in (await call(client, "flowise_list_chatflows"))["chatflows"]}


async def test_reuse_a_saved_design_live(live_flowise: tuple[str, str], data_dir: Path) -> None:
    from tests.packs.flowise.test_learning import RAG, SPEC

    async with Client(served(data_dir, live_flowise).server) as client:
        await call(client, "flowise_refresh_catalog")
        saved = await call(
            client,
            "flowise_save_artifact",
            request="a chatbot that answers questions about my PDF documents and remembers the chat",
            design=RAG,
            **SPEC,
        )
        found = await call(
            client, "flowise_find_design", request="chat with my PDF files and keep the conversation history"
        )
        assert found["designs"] and found["designs"][0]["artifact_id"] == saved["artifact_id"], found
        reused = await call(client, "flowise_reuse_design", artifact_id=saved["artifact_id"], approve=True)
        assert "issues" not in reused and reused["fill"] == ["pdfFile_0: Pdf File"], reused
        issues = [
            i for n in validation(live_flowise, reused["chatflow_id"]) for i in n["issues"] if i not in CREDENTIALS
        ]
        assert issues == ["Pdf File is required"]
        await call(client, "flowise_delete_chatflow", id=reused["chatflow_id"])
