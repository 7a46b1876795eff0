"""What the catalog embeds: one text per node and per template, written from its definition.

A node's text says what it is, why one uses it, how it connects and an example, so a
plain-language need ("remember the conversation") finds it even when the node's own
description is one terse line ("Retrieve chat messages stored in database"). The "why"
comes from the category; the "how" from the definition's class-typed inputs and output
classes; the example names a real consumer of its output from the same catalog. What users
call the node (model families, formats, products) comes from ``hints``.

``DOCUMENTS`` versions this text: a catalog embedded with another version is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentloom.packs.flowise.hints import HINTS

# The version of the node and template texts: the number changes with node_document or the template text (bump it
# by hand), the hash with HINTS (by itself), so catalogs embedded with other texts are embedded again.
DOCUMENTS = "3-" + hashlib.sha256(json.dumps(HINTS, sort_keys=True).encode()).hexdigest()[:8]

Definition = Mapping[str, Any]

# Plain types (parameters set in the UI), as opposed to class-typed anchors that take another node.
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
        "credential",
        "conditionFunction",
        "timePicker",
        "weekDaysPicker",
        "monthDaysPicker",
        "datePicker",
        "string | number | boolean | json | array",
    }
)

WHY = {
    "Chat Models": "Use it as the chat model (LLM) that writes the answers of a chain or agent.",
    "LLMs": "Use it as a text-completion language model (LLM) in a chain.",
    "Embeddings": "Use it to turn text into embedding vectors for a vector store and semantic search.",
    "Vector Stores": (
        "Use it to store document embeddings and retrieve the relevant chunks (RAG, questions over documents)."
    ),
    "Document Loaders": "Use it to load documents or data from a source, to split, embed and search them.",
    "Text Splitters": "Use it to split long documents into smaller chunks before embedding.",
    "Memory": "Use it to remember the conversation: earlier messages of the chat.",
    "Chains": "Use it as the node that runs the chatflow: it takes a model (and more) and answers the user.",
    "Agents": "Use it as the node that runs the chatflow: an agent that reasons and calls tools.",
    "Tools": "Use it to give an agent an action it can call.",
    "Tools (MCP)": "Use it to give an agent the tools of an MCP server.",
    "Retrievers": "Use it to retrieve relevant documents in a special way (re-ranking, compression, multiple queries).",
    "Output Parsers": "Use it to make the model answer in a structured format (JSON, lists, fields).",
    "Prompts": "Use it to write the prompt template the model receives.",
    "Moderation": "Use it to check user input for harmful content before the model sees it.",
    "Cache": "Use it to cache model answers and avoid repeated calls.",
    "Utilities": "Use it for helper logic in a flow (custom code, variables, conditions, notes).",
    "Record Manager": "Use it to keep track of indexed documents and avoid duplicates when upserting.",
    "Engine": "Use it as the LlamaIndex engine that runs the chatflow and answers.",
    "Response Synthesizer": "Use it to decide how a LlamaIndex engine builds its answer from retrieved text.",
    "Multi Agents": "Use it to build a team of agents with a supervisor.",
    "Sequential Agents": "Use it in a sequential agents graph.",
    "Agent Flows": "Use it in an Agentflow (V2), not in a chatflow.",
    "Graph": "Use it to query a graph database.",
}


def is_anchor(item: Mapping[str, Any]) -> bool:
    return str(item.get("type", "")) not in PARAM_TYPES


def words(identifier: str) -> str:
    """``chatOpenAI_LlamaIndex`` → ``chat Open AI Llama Index``: names as a person reads them."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|_", " ", identifier)
    return re.sub(r"\s+", " ", spaced).strip()


def output_classes(definition: Definition) -> list[str]:
    classes = list(definition.get("baseClasses") or [])
    for output in definition.get("outputs") or []:
        classes.extend(c for c in output.get("baseClasses") or [] if c not in classes)
    return classes


def consumers(catalog: Mapping[str, Definition]) -> dict[str, list[tuple[str, str]]]:
    """Class → [(node label, anchor label)] of the non-deprecated nodes that take it."""
    takers: dict[str, list[tuple[str, str]]] = {}
    for definition in catalog.values():
        if definition.get("badge") == "DEPRECATING":
            continue
        for item in definition.get("inputs") or []:
            if is_anchor(item):
                for cls in str(item["type"]).split(" | "):
                    takers.setdefault(cls.strip(), []).append((str(definition.get("label")), str(item.get("label"))))
    return takers


def node_document(definition: Definition, takers: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    label, name, category = definition.get("label", ""), definition.get("name", ""), definition.get("category", "")
    parts = [f"{label} ({words(str(name))}): {definition.get('description', '')}".strip()]
    hint = HINTS.get(str(name))
    if hint:
        parts.append(hint)
    parts.append(f"Category: {category}. {WHY.get(str(category), '')}".strip())
    anchors = [item for item in definition.get("inputs") or [] if is_anchor(item)]
    if anchors:
        needs = ", ".join(
            f"{a.get('label')} ({a.get('type')}"
            f"{', optional' if a.get('optional') else ''}{', several' if a.get('list') else ''})"
            for a in anchors
        )
        parts.append(f"Takes: {needs}.")
    classes = output_classes(definition)
    if classes:
        parts.append(f"Gives: {', '.join(classes[:4])}.")
    example = _example(definition, classes, takers)
    if example:
        parts.append(example)
    settings = [
        item for item in definition.get("inputs") or [] if not is_anchor(item) and not item.get("additionalParams")
    ]
    if settings:
        parts.append("Settings: " + ", ".join(_setting(item) for item in settings[:8]) + ".")
    credential = definition.get("credential") or {}
    if credential.get("credentialNames"):
        parts.append("Needs credential: " + ", ".join(words(c) for c in credential["credentialNames"]) + ".")
    if definition.get("badge") == "DEPRECATING":
        parts.append("Deprecated.")
    return " ".join(parts)


def _setting(item: Mapping[str, Any]) -> str:
    """A setting's label, with its default when that says something (a model name, a separator)."""
    default = item.get("default")
    if (
        isinstance(default, str)
        and 0 < len(default) <= 40
        and item.get("type") in ("string", "options", "asyncOptions")
    ):
        return f"{item.get('label')} (default {default.strip() or repr(default)})"
    return str(item.get("label"))


def _example(definition: Definition, classes: Sequence[str], takers: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    label = definition.get("label", "")
    for cls in classes:
        for taker, anchor in takers.get(cls, ()):
            if taker != label:
                return f"Example: connect it to {taker}'s {anchor} input."
    required = [a for a in definition.get("inputs") or [] if is_anchor(a) and not a.get("optional")]
    if required:
        return "Example: give it " + " and ".join(f"a {a.get('label')}" for a in required) + "."
    return ""


def template_document(name: str, description: str, usecases: Sequence[str], labels: Sequence[str]) -> str:
    text = f"{name}: {description}"
    if usecases:
        text += " Use cases: " + ", ".join(usecases) + "."
    if labels:
        text += " Nodes: " + ", ".join(labels) + "."
    return text
