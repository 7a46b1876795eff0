"""Which of the user's Flowise credentials each node of a chatflow gets.

A node definition names the credential kinds it accepts (``credential.credentialNames``, such as
``openAIApi``). Flowise lists the user's credentials by id, name and kind, never their secrets. A node runs
with the credential whose id is in ``data.credential``; Flowise's ``/validation`` looks for it in
``inputs.credential``; its UI also keeps it in ``inputs.FLOWISE_CREDENTIAL_ID``. All three are written.

``attach`` gives every node that needs a credential either one the caller named (by name or id) whose kind the
node accepts, or, when the caller named none of its kind and the user has exactly one, that one, saying so. A
node left without one is reported with the user's choices, so the agent can ask which. A named credential that
does not exist, or fits no node of the flow, is refused before anything is saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentloom.packs.flowise.planner import PlanError

INPUTS = ("credential", "FLOWISE_CREDENTIAL_ID")


@dataclass(frozen=True)
class Credential:
    id: str
    name: str
    kind: str

    @classmethod
    def listed(cls, records: Sequence[Mapping[str, Any]]) -> list[Credential]:
        return [
            cls(str(r["id"]), str(r.get("name") or r["id"]), str(r.get("credentialName") or ""))
            for r in records
            if r.get("id")
        ]


@dataclass
class Attachment:
    """``attached``: one line per credential used, naming its nodes; ``missing``: what the user still picks."""

    attached: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def needs(
    flow: Mapping[str, Any], catalog: Mapping[str, Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any], list[str]]]:
    """The flow's nodes that need a credential, each with the kinds it accepts."""
    out = []
    for node in flow.get("nodes", []):
        data = node.get("data", {})
        definition = catalog.get(data.get("name"), data)
        credential = definition.get("credential") or {}
        kinds = [str(k) for k in credential.get("credentialNames") or []]
        if kinds and not credential.get("optional"):
            out.append((node, kinds))
    return out


def resolve(wanted: Sequence[str], available: Sequence[Credential] | None, reason: str | None) -> list[Credential]:
    """The credentials the caller named, by id or name (any case); refused when one is unknown."""
    if not wanted:
        return []
    if available is None:
        raise PlanError(f"credentials: cannot look them up: {reason}")
    found = []
    for name in wanted:
        match = next((c for c in available if c.id == name), None) or next(
            (c for c in available if c.name.lower() == str(name).strip().lower()), None
        )
        if match is None:
            yours = ", ".join(f"{c.name} ({c.kind})" for c in available[:6]) or "none yet (add one in Flowise)"
            raise PlanError(f"credentials: no credential {name!r}; yours: {yours}")
        found.append(match)
    return found


def attach(
    flow: dict[str, Any],
    catalog: Mapping[str, Mapping[str, Any]],
    available: Sequence[Credential] | None,
    wanted: Sequence[Credential],
) -> Attachment:
    """Set each needing node's credential in ``flow`` (in place) and say what was used and what is missing."""
    result = Attachment()
    used: dict[tuple[Credential, str], list[str]] = {}
    fitted: set[Credential] = set()
    for node, kinds in needs(flow, catalog):
        data = node["data"]
        named = [c for c in wanted if c.kind in kinds]
        fitted.update(named)
        if len(named) > 1:
            raise PlanError(f"credentials: {', '.join(c.name for c in named)} all fit {node['id']}; give one")
        mine = [c for c in available or [] if c.kind in kinds]
        if named:
            choice, why = named[0], ""
        elif isinstance(data.get("credential"), str) and data["credential"]:
            continue  # an update keeps what the user picked
        elif len(mine) == 1:
            choice, why = mine[0], f"the only {mine[0].kind}"
        else:
            choices = f" (choose: {', '.join(c.name for c in mine[:4])})" if mine else ""
            result.missing.append(f"{'|'.join(kinds)} for {node['id']}{choices}")
            continue
        data["credential"] = choice.id
        data.setdefault("inputs", {}).update(dict.fromkeys(INPUTS, choice.id))
        used.setdefault((choice, why), []).append(node["id"])
    unused = [c for c in wanted if c not in fitted]
    if unused:
        raise PlanError(f"credentials: {unused[0].name} ({unused[0].kind}) fits no node of this chatflow")
    for (credential, why), nodes in used.items():
        result.attached.append(f"{credential.name} → {', '.join(nodes)}" + (f" ({why})" if why else ""))
    return result
