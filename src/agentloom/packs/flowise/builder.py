"""build_flow and update_chatflow: a chatflow created or changed in Flowise, flowData kept out of the reply.

The agent names what it wants in a few tokens; this module writes the whole flowData
(from the stored template, or planned from the node names, or read back from Flowise for an
update), applies the model, memory and settings asked for, attaches the user's credentials
(``credentials``), checks it against the rules Flowise needs to load and run it, saves it, asks the
server's own ``/validation`` for issues, and answers with the id, the name and, compactly, what is
still to do: credentials to pick (``credentials``, with the user's choices), settings still empty
(``fill``: a file, an index name) and any other issue the server reports (``issues``).

A template is used as the server would have it today: its sticky notes dropped and its nodes
upgraded to the catalog's versions (``upgrade``). A node the server lacks is named in ``issues``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from agentloom.core.errors import AgentloomError
from agentloom.packs.flowise.catalog import Catalog, Template, slug
from agentloom.packs.flowise.client import FlowiseClient, PermissionRefused
from agentloom.packs.flowise.credentials import Attachment, Credential, attach, needs, resolve
from agentloom.packs.flowise.customise import apply_settings, customise, replace_node
from agentloom.packs.flowise.design import build_design
from agentloom.packs.flowise.flowdata import check_flow, reference
from agentloom.packs.flowise.layout import resolve_overlaps
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
        credentials: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        if (template_id is None) == (nodes is None):
            raise AgentloomError("give template_id or nodes (a list of node names), not both or neither.")
        _check(name, temperature)
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
            flow = self._change(flow, model, temperature, memory_type, settings)
        except PlanError as exc:
            raise AgentloomError(str(exc)) from None
        if nodes is not None:
            problems = check_flow(flow, catalog)
            if problems:  # a planner bug, not the caller's: never create a flow we know is broken
                raise AgentloomError("no valid chatflow from these nodes: " + "; ".join(problems[:2]))
        name = name.strip() if name else default_name
        return self.create(flow, name, missing=missing, warning=warning, credentials=credentials)

    def update(
        self,
        chatflow_id: str,
        *,
        name: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        memory_type: str | None = None,
        settings: Mapping[str, Any] | None = None,
        credentials: Sequence[str] | None = None,
        swap: Mapping[str, str] | None = None,
        remove: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Change a saved chatflow (any made in Flowise, not only ours) with the same checks as a build."""
        if all(v is None for v in (name, model, temperature, memory_type, settings, credentials, swap, remove)):
            raise AgentloomError(
                "nothing to change: give name, model, temperature, memory_type, settings, credentials, swap or remove."
            )
        _check(name, temperature)
        record = self.client.get_chatflow(check_id(chatflow_id))
        try:
            flow = json.loads(record.get("flowData") or "{}")
        except ValueError:
            raise AgentloomError(
                f"chatflow {chatflow_id} holds flowData that is not JSON; fix it in Flowise."
            ) from None
        if not isinstance(flow, dict) or not isinstance(flow.get("nodes"), list):
            raise AgentloomError(f"chatflow {chatflow_id} has no nodes to change (is it an agentflow?).")
        warning = self.catalog.ensure()
        catalog = self.catalog.state().nodes
        before = set(check_flow(flow, catalog))
        try:
            if remove:
                _remove(flow, remove)
            if swap:
                _swap(flow, catalog, swap)
            flow = self._change(flow, model, temperature, memory_type, settings)
            attachment = self._attach(flow, credentials)
        except PlanError as exc:
            raise AgentloomError(str(exc)) from None
        problems = [p for p in check_flow(flow, catalog) if p not in before]
        if problems:
            raise AgentloomError("this change would break the chatflow: " + "; ".join(problems[:2]))
        changes: dict[str, Any] = {"flow_data": flow}
        if name is not None:
            changes["name"] = name.strip()
        updated = self.client.update_chatflow(record["id"], changes)
        return self._reply(updated, attachment, missing=[], warning=warning)

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

    def create(
        self,
        flow: dict[str, Any],
        name: str,
        *,
        missing: list[str],
        warning: str | None,
        credentials: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Attach credentials, create the chatflow and say what is left to do."""
        try:
            attachment = self._attach(flow, credentials)
        except PlanError as exc:
            raise AgentloomError(str(exc)) from None
        created = self.client.create_chatflow(name, flow)
        return self._reply(created, attachment, missing=missing, warning=warning)

    def _change(
        self,
        flow: dict[str, Any],
        model: str | None,
        temperature: float | None,
        memory_type: str | None,
        settings: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        if model is not None or temperature is not None or memory_type is not None:
            flow = customise(
                flow, self.catalog.state().nodes, model=model, temperature=temperature, memory_type=memory_type
            )
        if settings:
            apply_settings(flow, settings)
        return flow

    def _attach(self, flow: dict[str, Any], wanted: Sequence[str] | None) -> Attachment:
        """Credentials for the nodes that need one: those named, else the user's only one of a kind."""
        catalog = self.catalog.state().nodes
        if wanted is not None and (isinstance(wanted, str) or not all(isinstance(w, str) for w in wanted)):
            raise PlanError('credentials: give a list of credential names or ids, e.g. ["my OpenAI key"]')
        if not needs(flow, catalog):
            if wanted:
                raise PlanError("credentials: no node of this chatflow takes a credential")
            return Attachment()
        available: list[Credential] | None = None
        reason = None
        try:
            available = Credential.listed(self.client.credentials())
        except PermissionRefused as exc:
            reason = str(exc)
        attachment = attach(flow, catalog, available, resolve(wanted or [], available, reason))
        if reason and attachment.missing:
            attachment.missing.append(f"not listed: {reason}")
        return attachment

    def _reply(
        self, saved: dict[str, Any], attachment: Attachment, *, missing: list[str], warning: str | None
    ) -> dict[str, Any]:
        """Ask Flowise to validate the saved chatflow and say compactly what is left to do."""
        reply: dict[str, Any] = {"chatflow_id": saved["id"], "name": saved.get("name")}
        if attachment.attached:
            reply["attached"] = attachment.attached
        if attachment.missing:
            reply["credentials"] = attachment.missing
        fill, issues = self.blockers(saved["id"])
        if fill:
            reply["fill"] = fill
        if missing:
            issues.insert(0, "not on this Flowise: " + ", ".join(missing))
        if issues:
            reply["issues"] = issues
        if warning:
            reply["warning"] = warning
        return reply

    def blockers(self, chatflow_id: str) -> tuple[list[str], list[str]]:
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


def check_id(chatflow_id: str) -> str:
    """A chatflow id is a UUID: anything else is refused here, before Flowise answers it with a 500."""
    try:
        return str(uuid.UUID(str(chatflow_id).strip()))
    except ValueError:
        raise AgentloomError(
            f"chatflow_id {chatflow_id!r} is not a chatflow id (a UUID); flowise_list_chatflows shows them."
        ) from None


def _check(name: str | None, temperature: float | None) -> None:
    if name is not None and not name.strip():
        raise AgentloomError("name is empty; give the chatflow a name or leave it out.")
    if temperature is not None and not 0 <= temperature <= 2:
        raise AgentloomError(f"temperature {temperature} is outside 0-2.")


def _swap(flow: dict[str, Any], catalog: Mapping[str, Any], swap: Mapping[str, str]) -> None:
    """``{node id: node name}``: each named node replaced by a fresh one of that kind, rewired (customise); a
    taller newcomer keeps its place and pushes its neighbours down."""
    ids = {n["id"] for n in flow["nodes"]}
    for old, new in swap.items():
        if old not in ids:
            raise PlanError(f"swap: no node {old!r} in this chatflow; its nodes: {', '.join(sorted(ids)[:6])}")
        if not isinstance(new, str) or new not in catalog:
            raise PlanError(f"swap.{old}: {new!r} is not a node of this Flowise; flowise_search_nodes finds one")
        replace_node(flow, old, catalog[new], catalog, f"swap.{old}")
    resolve_overlaps(flow, {n["id"]: 0 if n["id"] in ids else -1 for n in flow["nodes"]})


def _remove(flow: dict[str, Any], remove: Sequence[str]) -> None:
    """Drop nodes, their edges and every input that referred to them; check_flow then says what that broke."""
    ids = {n["id"] for n in flow["nodes"]}
    gone = set(remove)
    if unknown := sorted(gone - ids):
        raise PlanError(f"remove: no node {unknown[0]!r} in this chatflow; its nodes: {', '.join(sorted(ids)[:6])}")
    flow["nodes"] = [n for n in flow["nodes"] if n["id"] not in gone]
    flow["edges"] = [e for e in flow["edges"] if e["source"] not in gone and e["target"] not in gone]
    references = {reference(i) for i in gone}
    for node in flow["nodes"]:
        inputs = node["data"].get("inputs") or {}
        for key, value in inputs.items():
            if isinstance(value, list) and references & set(value):
                inputs[key] = [v for v in value if v not in references]
            elif isinstance(value, str) and value in references:
                inputs[key] = ""


def _default_name(flow: dict[str, Any]) -> str:
    sources = {e.get("source") for e in flow.get("edges", [])}
    labels = [n["data"].get("label", n["data"].get("name")) for n in flow.get("nodes", [])]
    ending = [n["data"].get("label") for n in flow.get("nodes", []) if n.get("id") not in sources]
    return f"{ending[0] if ending else labels[0]} ({len(labels)} nodes)"
