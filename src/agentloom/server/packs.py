"""The pack interface: what a subsystem gives the server.

A pack is a :class:`Pack` object exposed through the ``agentloom.packs`` entry-point
group. Its tools are plain typed functions, exactly as with ``MCPServer.tool``::

    pack = Pack("notes", "Keep notes", requires=["sqlite3"])

    @pack.setup
    def open_store(ctx: PackContext) -> None:
        ...  # validate configuration, open stores; raise to be skipped

    @pack.tool(read_only=True)
    def notes_search(query: str) -> SearchResult:
        ...

Setup runs at server start, so it must be quick: import heavy libraries inside
functions, and leave slow checks to the pack's health hook.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mcp_types import ToolAnnotations
from pydantic import BaseModel

from agentloom.core.health import Check

if TYPE_CHECKING:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ToolSpec:
    fn: Callable[..., Any]
    name: str
    title: str | None
    description: str | None
    annotations: ToolAnnotations
    structured_output: bool | None


@dataclass
class PackContext:
    """What a pack's setup and tools may use; one per pack."""

    name: str
    settings: Settings
    breakers: BreakerRegistry
    embeddings: EmbeddingService
    state: Any = None  # whatever the pack's setup wants its tools to reach
    log: logging.Logger = field(init=False)

    def __post_init__(self) -> None:
        self.log = logging.getLogger(f"agentloom.packs.{self.name}")

    @property
    def data_dir(self) -> Path:
        """The pack's own folder under the data directory (created on demand)."""
        path = self.settings.data_dir / self.name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def config(self, model: type[M]) -> M:
        """The pack's settings: ``[pack_settings.<name>]`` and ``AGENTLOOM_<NAME>__*`` variables."""
        return self.settings.for_pack(self.name, model)


class Pack:
    def __init__(self, name: str, description: str, *, requires: Sequence[str] = ()) -> None:
        self.name = name
        self.description = description
        self.requires = tuple(requires)
        self.tools: list[ToolSpec] = []
        self._setup: Callable[[PackContext], Any] | None = None
        self._health: Callable[[PackContext], list[Check]] | None = None
        self.context: PackContext | None = None

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool = False,
        open_world: bool = False,
        structured_output: bool | None = None,
    ) -> Callable[[F], F]:
        """Declare a tool; the function's signature and return type are its schemas."""

        def decorator(fn: F) -> F:
            annotations = ToolAnnotations(
                read_only_hint=read_only,
                destructive_hint=destructive and not read_only,
                idempotent_hint=idempotent or read_only,
                open_world_hint=open_world,
            )
            self.tools.append(
                ToolSpec(fn, name or fn.__name__, title, description, annotations, structured_output)
            )
            return fn

        return decorator

    def setup(self, fn: Callable[[PackContext], Any]) -> Callable[[PackContext], Any]:
        self._setup = fn
        return fn

    def health(self, fn: Callable[[PackContext], list[Check]]) -> Callable[[PackContext], list[Check]]:
        self._health = fn
        return fn

    def start(self, ctx: PackContext) -> None:
        self.context = ctx
        if self._setup is not None:
            self._setup(ctx)

    def checks(self) -> list[Check]:
        if self._health is None or self.context is None:
            return []
        return self._health(self.context)

    def __repr__(self) -> str:
        return f"Pack({self.name!r}, tools={[t.name for t in self.tools]})"
