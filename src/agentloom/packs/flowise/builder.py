"""build_flow: a chatflow created in Flowise from a template or a node list, flowData kept out of the reply.

The agent names what it wants in a few tokens; this module writes the whole flowData
(from the stored template, or planned from the node names), checks it against the rules
Flowise needs to load and run it, creates the chatflow, asks the server's own
``/validation`` for issues, and answers with the id, the name and, compactly, what the
user still has to do in the UI: pick credentials (flows created through the API carry
none), fill the settings only they know (``fill``: a file to upload, an index name), and any
other issue the server reports (``issues``: a node not connected, say).

A template is used as the server would have it today: its sticky notes dropped and its nodes
upgraded to the catalog's versions (``upgrade``). A node the server lacks is named in ``issues``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.catalog import Catalog, Template, slug
from agentloom.packs.flowise.client import FlowiseClient
from agentloom.packs.flowise.customise import apply_settings, customise
from agentloom.packs.flowise.design import build_design
from agentloom.packs.flowise.flowdata import check_flow
from agentloom.packs.flowise.planner import PlanError, plan_flow
from agentloom.packs.flowise.upgrade import upgrade_nodes, without_notes

CREDENTIAL_ISSUES = ("Credential is required", "Connect Credential is required")
REQUIRED = " is required"
MAX_NODES = 30


class Builder:
    def __init__(self, catalog: Catalog, client: FlowiseClient) -> None:
        self.catalog = catalog
        self.client = client

    def template(self, template_id: str) -> Template:
        templates = self.catalog.state().templates
        wanted = template_id.strip()
        found = templates.get(wanted) or templates.get(slug(wanted))
        if found is None:
            found = next((t for t in templates.values() if t.flowise_id == wanted), None)
        if found is None:
            raise AgentloomError(f"template_id {template_id!r} unknown; flowise_search_templates finds one.")
        return found

    def build(
        self,
        *,
        template_id: str | None,
        nodes: Sequence[str] | None,
        name: str | None,
        model: str | None,
        temperature: float | None,
        memory_type: str | None,
        settings: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        if (template_id is None) == (nodes is None):
            raise AgentloomError("give template_id or nodes (a list of node names), not both or neither.")
        if name is not None and not name.strip():
            raise AgentloomError("name is empty; give the chatflow a name or leave it out.")
        if temperature is not None and not 0 <= temperature <= 2:
            raise AgentloomError(f"temperature {temperature} is outside 0-2.")
        warning = self.catalog.ensure()
        catalog = self.catalog.state().nodes
        missing: list[str] = []
        try:
            if template_id is not None:
                template = self.template(template_id)
                flow = without_notes(template.flow_data)
                upgrade_nodes(flow, catalog)
                default_name = template.name
                missing = sorted({n for n in template.nodes if n not in catalog})
            else:
                assert nodes is not None
                if not nodes or len(nodes) > MAX_NODES:
                    raise AgentloomError(f"nodes must list 1 to {MAX_NODES} node names.")
                flow = plan_flow(list(nodes), catalog)
                default_name = _default_name(flow)
            if model is not None or temperature is not None or memory_type is not None:
                flow = customise(flow, catalog, model=model, temperature=temperature, memory_type=memory_type)
            if settings:
                apply_settings(flow, settings)
        except PlanError as exc:
            raise AgentloomError(str(exc)) from None
        if nodes is not None:
            problems = check_flow(flow, catalog)
            if problems:  # a planner bug, not the caller's: never create a flow we know is broken
                raise AgentloomError("no valid chatflow from these nodes: " + "; ".join(problems[:2]))
        return self.create(flow, name.strip() if name else default_name, missing=missing, warning=warning)

    def design(self, design: dict[str, Any], name: str) -> dict[str, Any]:
        """A chatflow from a stored compact design (flowise_reuse_design)."""
        warning = self.catalog.ensure()
        catalog = self.catalog.state().nodes
        try:
            flow, notes = build_design(design, catalog)
        except PlanError as exc:
            raise AgentloomError(str(exc)) from None
        reply = self.create(flow, name, missing=[], warning=warning)
        if notes:
            reply["notes"] = notes
        return reply

    def create(self, flow: dict[str, Any], name: str, *, missing: list[str], warning: str | None) -> dict[str, Any]:
        """Create the chatflow, ask Flowise to validate it, and say compactly what is left to do."""
        catalog = self.catalog.state().nodes
        created = self.client.create_chatflow(name, flow)
        reply: dict[str, Any] = {"chatflow_id": created["id"], "name": created.get("name")}
        credentials = _credentials(flow, catalog)
        if credentials:
            reply["credentials"] = credentials
        fill, issues = self._validation(created["id"])
        if fill:
            reply["fill"] = fill
        if missing:
            issues.insert(0, "not on this Flowise: " + ", ".join(missing))
        if issues:
            reply["issues"] = issues
        if warning:
            reply["warning"] = warning
        return reply

    def _validation(self, chatflow_id: str) -> tuple[list[str], list[str]]:
        """Flowise's own validation, one short line per node: settings to fill, and other issues.
        Credential issues are left out (``credentials`` lists them from the definitions)."""
        fill, issues = [], []
        for node in self.client.validation(chatflow_id):
            node_id = node.get("id")
            texts = [
                i
                for i in node.get("issues") or []
                if i not in CREDENTIAL_ISSUES and not i.endswith("requires a credential")
            ]
            settings = [i[: -len(REQUIRED)] for i in texts if i.endswith(REQUIRED)]
            others = [i for i in texts if not i.endswith(REQUIRED)]
            if settings:
                fill.append(f"{node_id}: {', '.join(settings)}")
            if others:
                issues.append(f"{node_id}: {'; '.join(others)}")
        return fill, issues


def _credentials(flow: dict[str, Any], catalog: dict[str, dict[str, Any]]) -> list[str]:
    """``"openAIApi for chatOpenAI_0"``: what the user picks in the UI before the flow can run."""
    out = []
    for node in flow.get("nodes", []):
        data = node.get("data", {})
        definition = catalog.get(data.get("name"), data)
        credential = definition.get("credential") or {}
        names = credential.get("credentialNames") or []
        if names and not credential.get("optional"):
            out.append(f"{'|'.join(names)} for {node.get('id')}")
    return out


def _default_name(flow: dict[str, Any]) -> str:
    sources = {e.get("source") for e in flow.get("edges", [])}
    labels = [n["data"].get("label", n["data"].get("name")) for n in flow.get("nodes", [])]
    ending = [n["data"].get("label") for n in flow.get("nodes", []) if n.get("id") not in sources]
    return f"{ending[0] if ending else labels[0]} ({len(labels)} nodes)"
