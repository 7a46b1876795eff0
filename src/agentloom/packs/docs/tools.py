"""The MCP tools of the docs pack: ``search_docs`` and ``list_docsets``."""

from __future__ import annotations

import json
from typing import Annotated

from mcp_types import CallToolResult, TextContent
from pydantic import Field

from agentloom.core.errors import NotFoundError
from agentloom.core.health import Check
from agentloom.packs.docs.config import Project
from agentloom.packs.docs.discovery import ConfigWatcher
from agentloom.packs.docs.instructions import instruction
from agentloom.packs.docs.names import MAX_KEYWORD_LENGTH, MAX_KEYWORDS, check_keywords, check_name
from agentloom.packs.docs.settings import DocsSettings
from agentloom.server.packs import Pack, PackContext

pack = Pack(
    "docs",
    "Documentation navigation: where to look for what, from .knowledge/config.yaml",
    requires=["yaml"],
    cli="agentloom.packs.docs.cli:app",
)


class Docsets:
    """The pack's state: the configuration watcher, plus list_docsets' answer built once per
    loaded configuration."""

    def __init__(self, watcher: ConfigWatcher) -> None:
        self.watcher = watcher
        self._for: Project | None = None
        self._result: CallToolResult | None = None

    def result(self) -> CallToolResult:
        project = self.watcher.current()
        if project is not self._for or self._result is None:
            docsets = [d.as_dict() for d in project.docsets]
            self._result = CallToolResult(
                content=[TextContent(type="text", text=json.dumps(docsets, separators=(",", ":")))]
            )
            self._for = project
        return self._result


@pack.setup
def setup(ctx: PackContext) -> Docsets:
    settings = ctx.config(DocsSettings)
    docsets = Docsets(ConfigWatcher(settings.project_dir, config_path=settings.config_file))
    try:
        project = docsets.watcher.current()
        ctx.log.info("docs: %d docsets from %s", len(project.docsets), project.config_path)
    except Exception as exc:  # the tools report it on every call until the file is fixed
        ctx.log.warning("docs: %s", exc)
    return docsets


@pack.health
def health(docsets: Docsets) -> list[Check]:
    watcher = docsets.watcher
    try:
        project = watcher.current()
    except Exception as exc:
        if watcher.path is None:  # no project here: the tools explain how to create one
            return [Check("docs configuration", True, f"no .knowledge/config.yaml at or above {watcher.start}")]
        return [Check("docs configuration", False, str(exc), required=False)]
    return [Check("docs configuration", True, f"{len(project.docsets)} docsets in {project.config_path}")]


@pack.tool(read_only=True)
async def search_docs(
    docsets: Docsets,
    docset: Annotated[str, Field(description="Docset name or alias, as list_docsets shows it.")],
    keywords: Annotated[
        list[str],
        Field(description=f"The specific terms to look for, most specific first (1 to {MAX_KEYWORDS}, each under {MAX_KEYWORD_LENGTH + 1} characters)."),
    ],
    generalized_keywords: Annotated[
        list[str],
        Field(description="Broader or related terms to try when the specific ones find nothing (may be empty)."),
    ] = [],  # noqa: B006 - never mutated; the schema shows the default
) -> str:
    """Tell you where a docset's files are and how to search them with your own text-search tools."""
    check_name(docset, "docset")
    keywords = check_keywords(keywords, "keywords", required=True)
    generalized = check_keywords(generalized_keywords, "generalized_keywords", required=False)
    project = docsets.watcher.current()
    found = project.get(docset)
    if found is None:
        raise NotFoundError(
            f"docset: no docset is called {docset!r}. Available docsets: {project.available()}. "
            f"Call list_docsets, or add {docset!r} to {project.config_path}"
        )
    return instruction(found, keywords, generalized)


# The answer is one JSON array as text, with no structured copy: with 200 docsets an output
# schema cost the SDK's client 40 ms of validation per call, and a structured copy doubled
# the stdio round trip (1.9 ms -> 4.4 ms).
@pack.tool(read_only=True, structured_output=False)
async def list_docsets(docsets: Docsets) -> CallToolResult:
    """List the configured docsets as a JSON array: name, version, aliases, and local_path (the folder
    holding their files)."""
    return docsets.result()
