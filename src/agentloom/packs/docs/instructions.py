"""The navigation instruction ``search_docs`` returns: a template with single-brace variables."""

from __future__ import annotations

import re

from agentloom.packs.docs.config import DEFAULT_TEMPLATE, Docset

VARIABLES = ("keywords", "generalized_keywords", "local_path", "docset", "version")
# `{name}` but not `{{name}}`: doubled braces and unknown names are left exactly as written.
_VARIABLE = re.compile(r"(?<!\{)\{(" + "|".join(VARIABLES) + r")\}(?!\})")


def render(template: str, values: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: values[m.group(1)], template)


# The default instruction without its "try to find '{generalized_keywords}'" sentence, for a
# call that gave no broader terms (it would otherwise tell the agent to look for '').
WITHOUT_GENERALIZED = DEFAULT_TEMPLATE.replace(
    "If the search results don't help you, try to find '{generalized_keywords}'. ", ""
).replace("If this still doesn't help", "If this doesn't help")


def instruction(docset: Docset, keywords: list[str], generalized_keywords: list[str]) -> str:
    template = docset.template
    if not generalized_keywords and template == DEFAULT_TEMPLATE:
        template = WITHOUT_GENERALIZED
    return render(
        template,
        {
            "keywords": ", ".join(keywords),
            "generalized_keywords": ", ".join(generalized_keywords),
            "local_path": docset.local_path,
            "docset": docset.name,
            "version": docset.version or "",
        },
    )
