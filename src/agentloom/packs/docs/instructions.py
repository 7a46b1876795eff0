"""The navigation instruction ``search_docs`` returns: a template with single-brace variables."""

from __future__ import annotations

import re

from agentloom.packs.docs.config import Docset

VARIABLES = ("keywords", "generalized_keywords", "local_path", "docset", "version")
# `{name}` but not `{{name}}`: doubled braces and unknown names are left exactly as written.
_VARIABLE = re.compile(r"(?<!\{)\{(" + "|".join(VARIABLES) + r")\}(?!\})")


def render(template: str, values: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: values[m.group(1)], template)


def instruction(docset: Docset, keywords: list[str], generalized_keywords: list[str]) -> str:
    return render(
        docset.template,
        {
            "keywords": ", ".join(keywords),
            "generalized_keywords": ", ".join(generalized_keywords),
            "local_path": docset.local_path,
            "docset": docset.name,
            "version": docset.version or "",
        },
    )
