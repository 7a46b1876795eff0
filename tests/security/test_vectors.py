"""The vectors pack reads files only inside the allowed folders, and every refusal says why.

Allowed folders: the client's MCP roots and AGENTLOOM_VECTORS__FILE_ROOTS (default: the
server's working directory, unless that is `/` or the home folder).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import ListRootsResult, Root

from agentloom.server.host import Host
from tests.conftest import PYTHON
from tests.packs.vectors.conftest import chroma_server, store_settings, vectors_host  # noqa: F401 - fixtures
from tests.server.clients import serve_args


def collection_name() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def roots_of(*folders: Path) -> Any:
    async def list_roots(context: object) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=f.as_uri(), name=f.name) for f in folders])

    return list_roots


async def add_files(client: Client, collection: str, paths: list[str], **args: Any) -> tuple[bool, str, Any]:
    result = await client.call_tool("vector_add_files", {"collection": collection, "paths": paths, **args})
    return result.is_error, result.content[0].text, result.structured_content


def host_with(tmp_path: Path, **settings: object) -> tuple[Host, str]:
    host = vectors_host(tmp_path, **settings)
    name = collection_name()
    host.packs["vectors"].state.store.create_collection(name)
    return host, name


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A readable file the server must not index: outside every allowed folder."""
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir(parents=True)
    secret.write_text("# Secret\n\nThe launch code is 0000.")
    return secret


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "guide.md").write_text("# Guide\n\nHow to run the project.")
    return folder


async def test_files_outside_the_allowed_folders_are_refused_naming_them(
    tmp_path: Path, project: Path, outside: Path
) -> None:
    host, name = host_with(tmp_path / "data", file_roots=[str(project)])
    async with Client(host.server) as client:
        for path in ("/etc/hostname", str(outside), str(project / ".." / "outside" / "secret.md"), "../outside"):
            error, text, _ = await add_files(client, name, [path])
            assert error, f"{path} was read: {text}"
            assert "outside the folders vector_add_files may read" in text and str(project) in text, text
            assert "AGENTLOOM_VECTORS__FILE_ROOTS" in text
        # One path outside refuses the whole call: nothing is half-added.
        error, text, _ = await add_files(client, name, [str(project / "docs"), str(outside)])
        assert error and str(outside) in text
        assert (
            host.packs["vectors"].state.store.describe(host.packs["vectors"].state.store.collection(name))[
                "chunk_count"
            ]
            == 0
        )
        # Inside, relative paths are looked up in the allowed folders.
        error, text, added = await add_files(client, name, ["docs"])
        assert not error, text
        assert [d["document_id"] for d in added["documents"]] == ["docs/guide.md"]


async def test_symlinks_are_followed_before_the_check(tmp_path: Path, project: Path, outside: Path) -> None:
    (project / "docs" / "link.md").symlink_to(outside)
    (project / "linked-folder").symlink_to(outside.parent, target_is_directory=True)
    host, name = host_with(tmp_path / "data", file_roots=[str(project)])
    async with Client(host.server) as client:
        error, text, _ = await add_files(client, name, [str(project / "docs" / "link.md")])
        assert error and "resolved: " + str(outside) in text
        error, text, _ = await add_files(client, name, [str(project / "linked-folder")])
        assert error and "outside the folders" in text
        error, text, added = await add_files(client, name, [str(project / "docs")])
        assert not error, text
        assert [d["document_id"] for d in added["documents"]] == ["docs/guide.md"]
        assert added["skipped"] == [
            {
                "path": str(project / "docs" / "link.md"),
                "reason": "a symbolic link to a file outside the allowed folders (not read)",
            }
        ]
        found = await client.call_tool("vector_search", {"collection": name, "query": "launch code", "n": 10})
        assert "0000" not in found.content[0].text


async def test_the_clients_roots_are_allowed(tmp_path: Path, project: Path, outside: Path) -> None:
    host, name = host_with(tmp_path / "data", file_roots=[])  # nothing configured: only the client's roots
    async with Client(host.server, list_roots_callback=roots_of(project), mode="legacy") as client:
        error, text, added = await add_files(client, name, [str(project / "docs" / "guide.md")])
        assert not error, text
        assert added["documents"][0]["document_id"] == "docs/guide.md"
        error, text, _ = await add_files(client, name, [str(outside)])
        assert error and f"{project} (the client's roots)" in text
    async with Client(host.server, mode="legacy") as client:  # a client without roots
        error, text, _ = await add_files(client, name, [str(project / "docs" / "guide.md")])
        assert error and "may read no folder" in text and "AGENTLOOM_VECTORS__FILE_ROOTS" in text


async def test_the_default_is_the_working_directory_but_never_root_or_home(
    tmp_path: Path, project: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLOOM_VECTORS__FILE_ROOTS", raising=False)
    monkeypatch.chdir(project)
    host, name = host_with(tmp_path / "data", file_roots=None)
    async with Client(host.server) as client:
        error, text, _ = await add_files(client, name, ["docs/guide.md"])
        assert not error, text
        error, text, _ = await add_files(client, name, [str(outside)])
        assert error and f"{project} (the server's working directory" in text
        for start in ("/", str(Path.home())):
            monkeypatch.chdir(start)
            error, text, _ = await add_files(client, name, [str(outside)])
            assert error and "may read no folder" in text and "is not used by default" in text, text


async def test_file_roots_from_the_environment(
    tmp_path: Path, project: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOM_VECTORS__FILE_ROOTS", json.dumps([str(outside.parent)]))
    host, name = host_with(tmp_path / "data", file_roots=None)
    async with Client(host.server) as client:
        error, text, _ = await add_files(client, name, [str(outside)])
        assert not error, text
        error, text, _ = await add_files(client, name, [str(project)])
        assert error and f"{outside.parent} (AGENTLOOM_VECTORS__FILE_ROOTS)" in text
    monkeypatch.setenv("AGENTLOOM_VECTORS__FILE_ROOTS", os.pathsep.join([str(project), str(outside.parent)]))
    host, name = host_with(tmp_path / "data2", file_roots=None)
    async with Client(host.server) as client:
        error, text, _ = await add_files(client, name, [str(project), str(outside)])
        assert not error, text


@pytest.mark.slow
async def test_roots_over_stdio_from_a_real_client(server_env: dict[str, str], project: Path, outside: Path) -> None:
    """The server process, started elsewhere, reads the folders the client names as its roots."""
    server_env["AGENTLOOM_VECTORS__FILE_ROOTS"] = "[]"
    params = StdioServerParameters(command=PYTHON, args=serve_args("--packs", "vectors"), env=server_env)
    async with Client(stdio_client(params), list_roots_callback=roots_of(project), mode="legacy") as client:  # type: ignore[arg-type]
        await client.call_tool("vector_create_collection", {"name": "notes"})
        error, text, added = await add_files(client, "notes", [str(project / "docs")])
        assert not error, text
        assert [d["document_id"] for d in added["documents"]] == ["docs/guide.md"]
        error, text, _ = await add_files(client, "notes", ["/etc/hostname"])
        assert error and "outside the folders" in text and str(project) in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("patterns", "fragment"),
    [
        (["/etc/*"], "'/etc/*' is an absolute path, not a relative glob"),
        (["../*"], "leaves the folder with '..'"),
        (["docs/../../*"], "leaves the folder with '..'"),
        ([""], "is empty"),
        (["~/.ssh/*"], "absolute path"),
        ([], "patterns is empty"),
    ],
)
async def test_bad_patterns_are_refused_with_the_reason(
    tmp_path: Path, project: Path, patterns: list[str], fragment: str
) -> None:
    host, name = host_with(tmp_path / "data", file_roots=[str(project)])
    async with Client(host.server) as client:
        error, text, _ = await add_files(client, name, [str(project)], patterns=patterns)
    assert error and fragment in text, text
    assert "internal error" not in text
    if patterns:
        assert 'relative globs matched inside the folders given in paths, like "*.md"' in text


@pytest.mark.slow
async def test_search_refusals_say_why(tmp_path: Path, store_settings: dict[str, object]) -> None:
    host = vectors_host(tmp_path, **store_settings)
    name = collection_name()
    store = host.packs["vectors"].state.store
    store.create_collection(name)
    store.add_document(name, "Cats purr.", "cats", {"rank": 1, "topic": "cats"})
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"filter": {"rank": {"$in": list(range(50_000))}}},
            "has 50,000 values; at most 1,000 are allowed in one $in list",
        ),
        ({"filter": {"rank": {"$nin": list(range(1_001))}}}, "at most 1,000 are allowed in one $nin list"),
        (
            {"filter": {"$or": [{f"f{i}": {"$in": list(range(900))}} for i in range(7)]}},
            "more than 5,000 values in all",
        ),
        ({"filter": {"rank": {"$in": [1, "a"]}}}, "mixes integer and string values"),
        ({"filter": {"rank": {"$in": [1, 1.5]}}}, "mixes decimal and integer values"),
        ({"filter": {"rank": {"$in": [2**63]}}}, "does not fit in a 64-bit integer"),
        ({"filter": {"rank": 2**64}}, "does not fit in a 64-bit integer"),
        ({"document_contains": "x" * 100_000}, "document_contains has 100,000 characters; at most 1,000"),
    ]
    nested: dict[str, Any] = {"rank": 1}
    for _ in range(40):
        nested = {"$and": [nested, {"topic": "cats"}]}
    cases.append(({"filter": nested}, "nested more than 32 levels deep"))
    async with Client(host.server) as client:
        for args, fragment in cases:
            result = await client.call_tool("vector_search", {"collection": name, "query": "cats", **args})
            text = result.content[0].text
            assert result.is_error and fragment in text, (args if len(str(args)) < 200 else fragment, text)
            assert "internal error" not in text and "unreachable" not in text
        # Nothing above reached Chroma as a failure: the breaker is still closed, the store answers.
        ok = await client.call_tool(
            "vector_search", {"collection": name, "query": "cats", "filter": {"rank": {"$in": list(range(1_000))}}}
        )
        assert not ok.is_error and ok.structured_content["results"][0]["document_id"] == "cats"


async def test_metadata_refusals_say_why(tmp_path: Path, store_settings: dict[str, object]) -> None:
    host = vectors_host(tmp_path, **store_settings)
    name = collection_name()
    async with Client(host.server) as client:
        bad = await client.call_tool("vector_create_collection", {"name": name, "metadata": {"#team": "docs"}})
        assert bad.is_error and "'#team' is invalid" in bad.content[0].text and "Chroma reserves" in bad.content[0].text
        await client.call_tool("vector_create_collection", {"name": name})
        for metadata, fragment in [
            ({"#x": 1}, "'#x' is invalid"),
            ({"big": 2**64}, "does not fit in a 64-bit integer"),
        ]:
            result = await client.call_tool(
                "vector_add_document", {"collection": name, "text": "hello", "metadata": metadata}
            )
            assert result.is_error and fragment in result.content[0].text, result.content[0].text
