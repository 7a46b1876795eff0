"""The flowise pack's tools for a chatflow after it is built: change it, give it credentials, run it, test it.

``flowise_update_chatflow`` changes a saved chatflow with the checks of ``flowise_build_flow`` (the
credentials either attaches are the user's; ``agentloom flowise credentials`` lists them, never their secrets);
``flowise_predict`` asks the chatflow a question (streaming off) and answers with the text, the source
documents' names and the tools used; ``flowise_test_flow`` says in a few dozen tokens whether it is ready:
Flowise's validation, then one question.
"""

from __future__ import annotations

import os
from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.builder import CREDENTIAL_ISSUES, REQUIRED, check_id
from agentloom.packs.flowise.client import FlowiseFlowError
from agentloom.packs.flowise.tools import Built, Flowise, pack, run_call
from agentloom.server.packs import reply_of

MAX_ANSWER_CHARS = 4000
MAX_SOURCES = 5
TEST_QUESTION = "Hello"
TEST_LINES = 4
TEST_LINE_CHARS = 90


class CredentialLine(TypedDict):
    id: str
    name: str
    kind: str


class Answer(TypedDict):
    text: str
    session_id: NotRequired[str]
    sources: NotRequired[list[str]]
    tools: NotRequired[list[str]]


class Tested(TypedDict):
    ready: bool
    answer: NotRequired[str]
    blocks: NotRequired[list[str]]


@with_config(ConfigDict(json_schema_extra=reply_of("flowise_build_flow")))
class Updated(Built):
    pass


@pack.tool()
async def flowise_update_chatflow(
    state: Flowise,
    chatflow_id: str,
    name: str | None = None,
    settings: dict[str, dict[str, Any]] | None = None,
    credentials: list[str] | None = None,
    swap: dict[str, str] | None = None,
    remove: list[str] | None = None,
) -> Updated:
    """Change a saved chatflow as flowise_build_flow checks: name, settings, credentials, swap ({node id:
    node name}), remove (node ids)."""

    def update() -> Updated:
        reply = state.builder.update(
            chatflow_id, name=name, settings=settings, credentials=credentials, swap=swap, remove=remove
        )
        return reply  # type: ignore[return-value]  # Builder answers a plain dict with the reply's keys

    return await run_call(update)


def credential_lines(state: Flowise, kind: str | None = None) -> list[CredentialLine]:
    """The user's Flowise credentials (id, name, kind; never secrets), of one kind or all, by kind and name.
    Agents need no tool for it: a build names the choices when there are several (``credentials``)."""
    return sorted(
        (
            {"id": str(c["id"]), "name": str(c.get("name")), "kind": str(c.get("credentialName"))}
            for c in state.client.credentials()
            if c.get("id") and (kind is None or c.get("credentialName") == kind)
        ),
        key=lambda c: (c["kind"], c["name"]),
    )


@pack.tool(open_world=True)
async def flowise_predict(state: Flowise, chatflow_id: str, question: str, session_id: str | None = None) -> Answer:
    """Ask a chatflow; the same session_id continues a conversation."""
    if not isinstance(question, str) or not question.strip():
        raise AgentloomError("question: it is empty; write what the user would ask the chatflow.")

    def predict() -> Answer:
        answer = state.client.predict(check_id(chatflow_id), question, session_id)
        return _answer(answer)

    return await run_call(predict)


@pack.tool(open_world=True)
async def flowise_test_flow(state: Flowise, chatflow_id: str, question: str = TEST_QUESTION) -> Tested:
    """Is this chatflow ready? Validation, then one question: the answer, or what blocks it."""

    def test() -> Tested:
        flow_id = check_id(chatflow_id)
        blocks = _blocks(state.client.validation(flow_id))
        if blocks:
            return {"ready": False, "blocks": blocks}
        try:
            answer = state.client.predict(flow_id, question)
        except FlowiseFlowError as exc:
            return {"ready": False, "blocks": [_short(f"run: {exc.reason}", 2 * TEST_LINE_CHARS)]}
        text = str(answer.get("text") or answer.get("json") or "")
        if not text.strip():
            return {"ready": False, "blocks": ["it answered nothing: check the model's settings"]}
        return {"ready": True, "answer": _short(text, TEST_LINE_CHARS)}

    return await run_call(test)


def _answer(raw: dict[str, Any]) -> Answer:
    text = raw.get("text")
    if text is None and raw.get("json") is not None:
        text = str(raw["json"])
    text = str(text or "")
    if len(text) > MAX_ANSWER_CHARS:
        text = f"{text[:MAX_ANSWER_CHARS]}… ({len(text) - MAX_ANSWER_CHARS} more characters)"
    reply: Answer = {"text": text}
    if raw.get("sessionId"):
        reply["session_id"] = str(raw["sessionId"])
    sources = []
    for document in raw.get("sourceDocuments") or []:
        metadata = document.get("metadata") if isinstance(document, dict) else None
        name = next((metadata.get(k) for k in ("source", "filename", "title") if metadata and metadata.get(k)), None)
        if name:
            sources.append(os.path.basename(str(name).rstrip("/")) or str(name))
    if sources:
        reply["sources"] = list(dict.fromkeys(sources))[:MAX_SOURCES]
    tools = [str(t.get("tool")) for t in raw.get("usedTools") or [] if isinstance(t, dict) and t.get("tool")]
    if tools:
        reply["tools"] = list(dict.fromkeys(tools))
    return reply


def _blocks(validation: list[dict[str, Any]]) -> list[str]:
    """One short line per node Flowise's validation faults: ``"chatOpenAI_0: credential, Model Name"``."""
    lines = []
    for node in validation:
        issues = []
        for issue in node.get("issues") or []:
            if issue in CREDENTIAL_ISSUES or issue.endswith("requires a credential"):
                issue = "credential"
            elif issue.endswith(REQUIRED):
                issue = issue[: -len(REQUIRED)]
            issues.append(issue)
        if issues:
            lines.append(_short(f"{node.get('id')}: {', '.join(dict.fromkeys(issues))}", TEST_LINE_CHARS))
    if len(lines) > TEST_LINES:
        lines = [*lines[: TEST_LINES - 1], f"+{len(lines) - TEST_LINES + 1} more nodes"]
    return lines


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
