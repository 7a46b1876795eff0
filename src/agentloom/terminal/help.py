"""How the command lines' help names values, and what they answer to an unknown command.

Typer 0.29's rich help puts the parameter's Python type beside every option, flags included
(``--http <bool>``, ``--help <bool>``; its plain help leaves flags bare). Here a flag shows no tag;
an option that takes a value shows its metavar when it has one (``--data-dir DIR``), else a word
for what it takes (``TEXT``, ``N``, ``NUMBER``, ``PATH``, or its choices); an argument shows none
(its name says what it is). :func:`apply` changes the one method typer's help asks, at import
of the command lines.

:class:`SuggestingGroup` answers an unknown command with the nearest ones, also for words whose
spelling is nothing like the command's (``list`` for ``status``), or with every command.
"""

from __future__ import annotations

import difflib
from typing import Any

from typer._click.exceptions import UsageError
from typer.core import TyperArgument, TyperGroup, TyperOption

# What typer calls a value's type, as the help names it instead.
WORDS = {
    "<str>": "TEXT",
    "<int>": "N",
    "<int range>": "N",
    "<float>": "NUMBER",
    "<float range>": "NUMBER",
    "<path>": "PATH",
    "<file>": "FILE",
    "<directory>": "DIR",
    "<list[str]>": "TEXT",
    "<datetime>": "DATETIME",
}

# Words people type for a command of another name: an unknown `list` suggests `status` where a
# group has no `list`. Only the names a group has are suggested.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "list": ("status", "packs"),
    "ls": ("list", "status", "packs"),
    "show": ("status", "list"),
    "info": ("status", "doctor"),
    "stat": ("status", "stats"),
    "check": ("doctor", "status"),
    "health": ("doctor", "status"),
    "add": ("new", "index"),
    "create": ("new", "add"),
    "update": ("refresh", "index"),
    "sync": ("refresh", "index"),
    "pull": ("refresh", "init"),
    "fetch": ("refresh", "init"),
    "download": ("init", "refresh"),
    "find": ("search",),
    "query": ("search",),
    "delete": ("remove", "reset", "prune"),
    "rm": ("remove", "reset", "prune"),
    "start": ("serve",),
    "run": ("serve",),
    "version": ("--version",),
}


def _option_type(self: TyperOption, ctx: Any) -> str | None:
    if self.is_flag or self.count:
        return None
    if self.metavar is not None:
        return self.metavar
    label = _typer_option_type(self, ctx)
    return None if label is None else WORDS.get(label, label.strip("<>"))


def _argument_type(self: object, ctx: object) -> str | None:
    return None


_typer_option_type = TyperOption.display_type_rich


def apply() -> None:
    """Make typer's help show the tags described above (idempotent)."""
    # typer offers no hook for the type shown in help: the one method it asks is replaced.
    TyperOption.display_type_rich = _option_type  # type: ignore[method-assign]  # see the line above
    TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign]  # see two lines above


def suggestions(name: str, commands: list[str], options: tuple[str, ...] = ()) -> list[str]:
    """The commands (or the group's ``options``) nearest to ``name``: its synonyms that exist, then the
    commands spelled alike."""
    found = [c for c in SYNONYMS.get(name.lower(), ()) if c in commands or c in options]
    found += [c for c in difflib.get_close_matches(name, commands, n=3, cutoff=0.6) if c not in found]
    return found


class SuggestingGroup(TyperGroup):
    """A command group that answers an unknown command with the nearest ones, or with all of them."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            name = args[0] if args else ""
            if name and not name.startswith("-") and self.get_command(ctx, name) is None:
                commands = sorted(n for n, c in self.commands.items() if not c.hidden)
                options = tuple(o for p in self.params for o in getattr(p, "opts", ()))
                found = suggestions(name, commands, options)
                hint = (
                    f"Did you mean {' or '.join(repr(c) for c in found)}?"
                    if found
                    else f"The commands are {', '.join(commands)}."
                )
                exc.message = f"No such command {name!r}. {hint}"
            raise


apply()

__all__ = ["SuggestingGroup", "apply", "suggestions"]
