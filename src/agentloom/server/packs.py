"""The pack interface: what a subsystem gives the server.

A pack is a :class:`Pack` object exposed through the ``agentloom.packs`` entry-point
group. Its setup is its one opener: it makes the pack's own typed state from what the
:class:`PackContext` hands it (the pack's settings, its folder, the shared breakers and
embedding service), for a server and for the pack's command line alike. A tool that names
the state's type as a parameter receives it, and every other parameter is the tool's input
schema, exactly as with ``MCPServer.tool``::

    pack = Pack("notes", "Keep notes", cli="notes_pack.cli:app")

    @pack.setup
    def open_store(ctx: PackContext) -> Notes:
        return Notes(ctx.data_dir / "notes.db")     # raise to be skipped

    @pack.tool(read_only=True)
    def notes_search(notes: Notes, query: str) -> SearchResult:
        return notes.search(query)

    @pack.health
    def check(notes: Notes) -> list[Check]:
        return [Check("notes store", notes.ok(), str(notes.path))]

    @app.command()                                  # in notes_pack/cli.py
    def search(query: str, data_dir: DataDir = None) -> None:
        notes = open_pack(pack, data_dir)           # the same setup, outside a server

The :class:`Pack` holds only declarations. Each server (:class:`~agentloom.server.host.Host`)
runs setup itself and binds the resulting state into its own copies of the tools, so two
servers in one process never share or overwrite a pack's state. A command gets the state
through :meth:`Pack.open` (``agentloom.terminal.common.open_pack``), which runs the same setup
with a context of its own; ``ctx.serving`` tells the two apart, for work only a server wants
(a background scan).

Setup runs at server start, so it must be quick: import heavy libraries inside
functions, and leave slow checks to the health hook. ``cli`` names a typer app
(``"module:attribute"``, imported only when the command line needs it) that appears as
``agentloom <pack> ...``.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from mcp_types import ToolAnnotations
from pydantic import BaseModel

from agentloom.core.health import Check

# reply_of is the pack interface's; it lives beside the listing rule it serves.
from agentloom.server.schemas import reply_of as reply_of
from agentloom.server.services import Services

if TYPE_CHECKING:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound=BaseModel)
S = TypeVar("S")


class HostServices(Protocol):
    """What a server offers its packs beyond settings, breakers and embeddings."""

    def health(self, *, check_model: bool = True, progress: Callable[[str], None] | None = None) -> dict[str, Any]: ...


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
    """What a pack's setup may use; one per pack and server, or per command (``host`` is None there)."""

    name: str
    settings: Settings
    services: Services
    host: HostServices | None = None
    log: logging.Logger = field(init=False)

    def __post_init__(self) -> None:
        self.log = logging.getLogger(f"agentloom.packs.{self.name}")

    @property
    def serving(self) -> bool:
        """Whether a server runs the pack; a command's setup skips what only a server wants (a background scan)."""
        return self.host is not None

    @property
    def breakers(self) -> BreakerRegistry:
        """The process's circuit breakers, one per outside dependency."""
        return self.services.breakers

    @property
    def embeddings(self) -> EmbeddingService:
        """The process's embedding service (made on first use)."""
        return self.services.embeddings

    @property
    def data_dir(self) -> Path:
        """The pack's own folder under the data directory, created on demand."""
        path = self.settings.data_dir / self.name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def config(self, model: type[M]) -> M:
        """The pack's settings: ``[pack_settings.<name>]`` and ``AGENTLOOM_<NAME>__*`` variables.

        A bad value raises :class:`ConfigError` naming the setting as a user writes it."""
        return self.settings.for_pack(self.name, model)


class Pack(Generic[S]):
    def __init__(
        self,
        name: str,
        description: str,
        *,
        requires: Sequence[str] = (),
        install: str | None = None,
        cli: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        # Modules the pack cannot load without, and the pip requirement that brings them (an extra).
        self.requires = tuple(requires)
        self.install = install
        self.cli = cli
        self.tools: list[ToolSpec] = []
        self._setup: Callable[[PackContext], S] | None = None
        self._health: Callable[[S], list[Check]] | None = None

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
            self.tools.append(ToolSpec(fn, name or fn.__name__, title, description, annotations, structured_output))
            return fn

        return decorator

    def setup(self, fn: Callable[[PackContext], S]) -> Callable[[PackContext], S]:
        """Declare the pack's opener: the one function that makes its state, in a server and in a command."""
        self._setup = fn
        return fn

    def health(self, fn: Callable[[S], list[Check]]) -> Callable[[S], list[Check]]:
        self._health = fn
        return fn

    def start(self, ctx: PackContext) -> LoadedPack[S]:
        """Run setup for one server; the result carries the state and the tools bound to it."""
        state = self._setup(ctx) if self._setup is not None else None
        state_type = self._state_type()
        tools = [_bind(spec, state_type, state) for spec in self.tools]
        return LoadedPack(self, state, tools)  # type: ignore[arg-type]  # state is S or None without a setup

    def open(self, settings: Settings) -> S:
        """The pack's state for a command, made by the setup a server runs: a context with services of
        its own (the embedding service made on first use) and no host, so ``ctx.serving`` is false."""
        if self._setup is None:
            raise TypeError(f"pack {self.name!r} declares no setup: it has no state to open")
        return self._setup(PackContext(self.name, settings, Services(settings)))

    def _state_type(self) -> Any:
        if self._setup is None:
            return None
        returns = inspect.signature(self._setup, eval_str=True).return_annotation
        return None if returns in (inspect.Signature.empty, None, type(None)) else returns

    def __repr__(self) -> str:
        return f"Pack({self.name!r}, tools={[t.name for t in self.tools]})"


@dataclass(frozen=True)
class LoadedPack(Generic[S]):
    """A pack as one server runs it: its state and its tools with that state bound in."""

    pack: Pack[S]
    state: S
    tools: list[ToolSpec]

    def checks(self) -> list[Check]:
        if self.pack._health is None:
            return []
        return self.pack._health(self.state)


def _bind(spec: ToolSpec, state_type: Any, state: Any) -> ToolSpec:
    """A copy of the tool whose state parameter is filled in and hidden from the schema."""
    signature = inspect.signature(spec.fn, eval_str=True)
    injected = [p.name for p in signature.parameters.values() if state_type is not None and p.annotation is state_type]
    if not injected:
        return spec
    fn = spec.fn
    values = {name: state for name in injected}
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def bound(*args: Any, **kwargs: Any) -> Any:
            return await fn(*args, **values, **kwargs)

    else:

        @functools.wraps(fn)
        def bound(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **values, **kwargs)

    # The SDK builds the input schema from this signature, and finds the Context parameter
    # through these (already resolved) annotations: the state is not an argument.
    kept = [p for p in signature.parameters.values() if p.name not in values]
    bound.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]  # read by inspect.signature
    bound.__annotations__ = {p.name: p.annotation for p in kept if p.annotation is not inspect.Parameter.empty}
    if signature.return_annotation is not inspect.Signature.empty:
        bound.__annotations__["return"] = signature.return_annotation
    del bound.__wrapped__
    return ToolSpec(bound, spec.name, spec.title, spec.description, spec.annotations, spec.structured_output)
