"""Files below one folder, reached without ever following a symbolic link.

The folder is opened once; every path below it is walked one component at a time from that
directory descriptor with ``O_NOFOLLOW``, so a link anywhere on the way (committed to a
repository, planted in a docset folder, or swapped in during a run) is refused, never
followed. Names are checked before use: only plain relative paths (``docs/a.md``) pass.

Used for both sides of a copy: reading a cloned repository and writing a docset folder.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from types import TracebackType
from typing import Self

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_CHUNK = 1024 * 1024


def path_problem(name: object) -> str | None:
    """Why ``name`` is not a plain relative path like ``docs/a.md`` below a folder, or None."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if "\0" in name:
        return "contains a NUL character"
    if name.startswith("/") or PureWindowsPath(name).drive or PureWindowsPath(name).root:
        return "is an absolute path"
    if os.sep != "/" and os.sep in name:
        return "contains a path separator of this system"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out of the folder with '..'"
    if any(part in ("", ".") for part in parts):
        return "is not a plain relative path"
    return None


class UnsafePath(Exception):
    """A path that would leave the folder, or that a symbolic link stands in the way of."""


@dataclass(frozen=True)
class Staged:
    name: str
    temp: str  # a temporary file beside ``name``, in the same folder


class Folder:
    """One folder, opened once. ``label`` names it in messages ("the repository")."""

    def __init__(self, root: Path, label: str, fix: str) -> None:
        self.root, self.label, self.fix = root, label, fix
        self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # -- walking -------------------------------------------------------------------------

    def _parts(self, name: str) -> list[str]:
        problem = path_problem(name)
        if problem:
            raise UnsafePath(f"{name!r} {problem}; only paths inside {self.label} are used")
        return name.split("/")

    def _refuse(self, parent_fd: int, parts: list[str]) -> UnsafePath:
        """The message for a component that could not be opened as a folder without following a link."""
        rel = "/".join(parts)
        try:
            mode = os.lstat(parts[-1], dir_fd=parent_fd).st_mode
        except OSError:
            mode = 0
        if stat.S_ISLNK(mode):
            return UnsafePath(self.link_message(rel, _readlink(parent_fd, parts[-1])))
        return UnsafePath(f"{rel} in {self.label} is a file where a folder is needed; {self.fix}")

    def link_message(self, rel: str, target: str) -> str:
        return f"{rel} in {self.label} is a symbolic link (to {target}); links are never followed. {self.fix}"

    def _walk(self, parts: list[str], create: bool = False) -> list[int]:
        """Descriptors of the root (a duplicate) and of each folder in ``parts``; the caller closes them."""
        fds = [os.dup(self.fd)]
        try:
            for i, part in enumerate(parts):
                try:
                    fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
                    continue
                except FileNotFoundError:
                    if not create:
                        raise
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise self._refuse(fds[-1], parts[: i + 1]) from None
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fds[-1])
                except FileExistsError:
                    pass  # made meanwhile; opening it below checks what it is
                try:
                    fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise self._refuse(fds[-1], parts[: i + 1]) from None
                    raise
            return fds
        except BaseException:
            _close_all(fds)
            raise

    def _parent(self, name: str, create: bool = False) -> tuple[list[int], str]:
        parts = self._parts(name)
        return self._walk(parts[:-1], create), parts[-1]

    # -- reading -------------------------------------------------------------------------

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry itself (a link is not followed); None when it (or a folder above it) is missing."""
        try:
            fds, leaf = self._parent(name)
        except FileNotFoundError:
            return None
        try:
            return os.lstat(leaf, dir_fd=fds[-1])
        except FileNotFoundError:
            return None
        finally:
            _close_all(fds)

    def open_file(self, name: str) -> int:
        """A descriptor of the regular file ``name``; a link or anything else is refused."""
        fds, leaf = self._parent(name)
        try:
            try:
                fd = os.open(leaf, _READ_FLAGS, dir_fd=fds[-1])
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePath(self.link_message(name, _readlink(fds[-1], leaf))) from None
                raise
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise UnsafePath(f"{name} in {self.label} is not a regular file; {self.fix}")
            return fd
        finally:
            _close_all(fds)

    def file_hash(self, name: str) -> str | None:
        """The sha256 of the regular file ``name``, None when it does not exist."""
        try:
            fd = self.open_file(name)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()

    # -- writing -------------------------------------------------------------------------

    def stage(self, name: str, source: Folder, mtime: float) -> Staged:
        """Copy ``source``'s file ``name`` to a temporary file beside ``name`` here (made with its folders)."""
        src = source.open_file(name)
        try:
            fds, leaf = self._parent(name, create=True)
            try:
                self._check_target(fds[-1], name, leaf)
                temp = f".{leaf[:100]}.{os.urandom(6).hex()}.tmp"
                out = os.open(temp, _NEW_FLAGS, 0o666, dir_fd=fds[-1])
                try:
                    while chunk := os.read(src, _CHUNK):
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(out, view) :]
                    os.utime(out, (mtime, mtime))  # the source commit's time: when this content was written
                except BaseException:
                    os.close(out)
                    os.unlink(temp, dir_fd=fds[-1])
                    raise
                os.close(out)
                return Staged(name, temp)
            finally:
                _close_all(fds)
        finally:
            os.close(src)

    def commit(self, staged: Staged) -> None:
        """Rename a staged file over its name: the rename replaces the entry, it never follows a link."""
        fds, leaf = self._parent(staged.name)
        try:
            self._check_target(fds[-1], staged.name, leaf)
            os.replace(staged.temp, leaf, src_dir_fd=fds[-1], dst_dir_fd=fds[-1])
        finally:
            _close_all(fds)

    def discard(self, staged: Staged) -> None:
        try:
            fds, _ = self._parent(staged.name)
        except (OSError, UnsafePath):
            return
        try:
            os.unlink(staged.temp, dir_fd=fds[-1])
        except OSError:
            pass
        finally:
            _close_all(fds)

    def _check_target(self, parent_fd: int, name: str, leaf: str) -> None:
        try:
            mode = os.lstat(leaf, dir_fd=parent_fd).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise UnsafePath(self.link_message(name, _readlink(parent_fd, leaf)))
        if not stat.S_ISREG(mode):
            raise UnsafePath(f"{name} in {self.label} is not a regular file; {self.fix}")

    def remove(self, name: str, written_hash: str | None) -> str | None:
        """Delete ``name`` if it is still the regular file that was written (its sha256 is
        ``written_hash``), then any folders above it left empty. Returns why a file was kept;
        None when it was deleted or was already gone."""
        try:
            parts = self._parts(name)
            fds = self._walk(parts[:-1])
        except FileNotFoundError:
            return None
        except UnsafePath as exc:
            return str(exc)
        try:
            leaf = parts[-1]
            try:
                mode = os.lstat(leaf, dir_fd=fds[-1]).st_mode
            except FileNotFoundError:
                return None
            if stat.S_ISLNK(mode):
                return (
                    f"it is a symbolic link (to {_readlink(fds[-1], leaf)}), which is never written here, "
                    "so not ours to delete"
                )
            if not stat.S_ISREG(mode):
                return "it is not a regular file, so not ours to delete"
            if written_hash is None:
                return "the metadata does not record what was written there, so it may not be ours to delete"
            try:
                fd = os.open(leaf, _READ_FLAGS, dir_fd=fds[-1])
            except OSError as exc:
                return f"it cannot be read ({exc.strerror or exc})"
            with os.fdopen(fd, "rb") as handle:
                if hashlib.file_digest(handle, "sha256").hexdigest() != written_hash:
                    return "it changed since it was fetched"
            os.unlink(leaf, dir_fd=fds[-1])  # unlink removes the entry in this folder, never a link's target
            for i in range(len(fds) - 1, 0, -1):  # prune folders left empty, deepest first
                os.close(fds.pop())
                try:
                    os.rmdir(parts[i - 1], dir_fd=fds[-1])
                except OSError:
                    break
            return None
        finally:
            _close_all(fds)


def _readlink(dir_fd: int, name: str) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return "?"


def _close_all(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass
