"""schemathesis hooks for the Stitch API fuzz test (loaded with SCHEMATHESIS_HOOKS).

``schema_valid_accepted`` is schemathesis's ``positive_data_acceptance`` with one exception,
the one the schema cannot avoid: a schema-valid request refused with a 422 whose every problem
is a rule JSON Schema cannot say (``graph.BEYOND_SCHEMA``: edges naming missing nodes, cycles,
duplicate ids, fan-out scopes, the server's webhook policy; an opaque ``cursor`` the server
never gave), or a 400, which the API documents as "not possible in the node's state" (retrying
a node that has not failed): the state, not the request, decides. So does a run input or a
completion that does not fit the input schema its flow holds (type ``input_schema``). Any other refusal of a
schema-valid request still fails.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

from agentloom.stitch.graph import BEYOND_SCHEMA


def _beyond_schema(problem: Any) -> bool:
    if not isinstance(problem, dict):
        return False
    if problem.get("type") == "graph":
        return problem.get("rule") in BEYOND_SCHEMA
    if problem.get("type") == "input_schema":  # the flow's own input schema, which no request schema knows
        return True
    return problem.get("loc") == ["query", "cursor"]


@schemathesis.check
def schema_valid_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    if response.status_code == 400:
        return None
    if response.status_code == 422:
        try:
            detail = json.loads(response.content)["detail"]
        except (ValueError, KeyError, TypeError):
            detail = None
        if isinstance(detail, list) and detail and all(_beyond_schema(p) for p in detail):
            return None
    return positive_data_acceptance(ctx, response, case)
