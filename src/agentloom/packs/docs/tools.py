"""The MCP tools of the docs pack: ``search_docs`` and ``list_docsets``."""

from __future__ import annotations

import json
import logging
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent
from pydantic import Field
from typing_extensions import TypedDict

from agentloom.core.errors import AgentloomError, ConfigError, NotFoundError
from agentloom.core.health import Check
from agentloom.packs.docs.config import Project
from agentloom.packs.docs.discovery import ConfigWatcher, find_config
from agentloom.packs.docs.instructions import instruction
from agentloom.packs.docs.names import (
    MAX_KEYWORD_LENGTH,
    MAX_KEYWORDS,
    check_keywords,
    check_name,
)
from agentloom.packs.docs.settings import DocsSettings
from agentloom.server.packs import Pack, PackContext
from agentloom.server.roots import client_roots

log = logging.getLogger(__name__)

pack: Pack[Docsets] = Pack(
    "docs",
    "Documentation navigation: where to look for what, from .knowledge/config.yaml",
    requires=["yaml"],
    cli="agentloom.packs.docs.cli:app",
)


class DocsetInfo(TypedDict):
    name: str
    version: str | None
    aliases: list[str]
    local_path: str
    description: str | None
    web_sources: list[str]


class DocsetList(TypedDict):
    docsets: list[DocsetInfo]


class Docsets:
    """The pack's state: the configuration watcher, plus list_docsets' answer built once per
    loaded configuration.

    Desktop clients often start servers in ``/``, where no configuration is found. Then the
    client's roots (``roots/list``) are searched, and the first project found there is kept.
    """

    def __init__(self, watcher: ConfigWatcher) -> None:
        self.watcher = watcher
        self._for: Project | None = None
        self._result: CallToolResult | None = None

    async def project(self, ctx: Context) -> Project:
        try:
            return self.watcher.current()
        except ConfigError as exc:
            if self.watcher.path is not None or not self.watcher.searching:
                raise  # a configuration was found (or named) and is broken: say so as it is
            roots = await client_roots(ctx)
            for root in roots:
                found = find_config(root)
                if found is not None:
                    self.watcher = ConfigWatcher(root)
                    return self.watcher.current()
            tried = f" nor in the client's roots ({', '.join(str(r) for r in roots)})" if roots else ""
            raise ConfigError(
                f"{exc}{tried}. Or set AGENTLOOM_DOCS__PROJECT_DIR=/path/to/project in the server's environment"
            ) from None

    async def result(self, ctx: Context) -> CallToolResult:
        project = await self.project(ctx)
        if project is not self._for or self._result is None:
            docsets = [d.as_dict() for d in project.docsets]
            self._result = CallToolResult(
                content=[TextContent(type="text", text=json.dumps(docsets, separators=(",", ":")))],
                structured_content={"docsets": docsets},
            )
            self._for = project
        return self._result


@pack.setup
def setup(ctx: PackContext) -> Docsets:
    """The watcher of the configured project's ``.knowledge/config.yaml``; a server logs what it found."""
    config = ctx.config(DocsSettings)
    docsets = Docsets(ConfigWatcher(config.project_dir, config_path=config.config_file))
    if ctx.serving:  # a command reports the configuration itself
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
    except Exception as exc:  # optional: the other packs work without it, but it is not fine
        if watcher.path is None:
            return [
                Check(
                    "docs configuration",
                    False,
                    f"no .knowledge/config.yaml at or above {watcher.start}; the docs tools will look in the "
                    "client's roots, or set AGENTLOOM_DOCS__PROJECT_DIR",
                    required=False,
                )
            ]
        return [Check("docs configuration", False, str(exc), required=False)]
    return [Check("docs configuration", True, f"{len(project.docsets)} docsets in {project.config_path}")]


@pack.tool(read_only=True)
async def search_docs(
    docsets: Docsets,
    ctx: Context,
    docset: Annotated[str, Field(description="Name or alias, from list_docsets.")],
    keywords: Annotated[
        list[str],
        Field(
            description=f"Terms to look for, most specific first (1 to {MAX_KEYWORDS}, "
            f"each under {MAX_KEYWORD_LENGTH + 1} characters)."
        ),
    ],
    generalized_keywords: Annotated[
        list[str],
        Field(description="Broader terms to try when the specific ones find nothing."),
    ] = [],  # noqa: B006 - never mutated; the schema shows the default
) -> str:
    """Tell you where a docset's files are and how to search them with your own text-search tools."""
    check_name(docset, "docset")
    keywords = check_keywords(keywords, "keywords", required=True)
    generalized = check_keywords(generalized_keywords, "generalized_keywords", required=False)
    project = await docsets.project(ctx)
    found = project.get(docset)
    if found is None:
        raise NotFoundError(
            f"docset: no docset is called {docset!r}. Available docsets: {project.available()}. "
            f"Call list_docsets, or add {docset!r} to {project.config_path}"
        )
    if found.web_sources and not found.path.is_dir():
        raise AgentloomError(
            f"docset {found.name!r} has not been downloaded yet ({found.local_path} does not exist). "
            f"Run `agentic-knowledge init {found.name}` in {project.root} (or `agentloom docs init {found.name}`), "
            "then search again"
        )
    return instruction(found, keywords, generalized)


# The text is the JSON array the seed describes; the structured copy carries the same list
# under "docsets" (an output schema must describe an object).
@pack.tool(read_only=True)
async def list_docsets(docsets: Docsets, ctx: Context) -> Annotated[CallToolResult, DocsetList]:
    """The configured docsets; local_path is the folder holding a docset's files."""
    return await docsets.result(ctx)
