"""search_docs and list_docsets through a real MCP client."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from mcp.client import Client

from agentloom.packs.docs.names import MAX_KEYWORDS
from agentloom.server.host import Host
from tests.packs.docs.conftest import docs_host, write_config

CONFIG = """\
docsets:
  - name: react
    version: "18.2"
    aliases: [reactjs]
  - name: vue
    version: 3.4
    template: "Look in {local_path} for {keywords} ({docset} {version});
      else {generalized_keywords}. {unknown} {{keywords}}"
"""


def _checks(host: Host) -> list[dict[str, Any]]:
    """The health report's checks (Host.health types its values as object)."""
    checks = host.health(check_model=False)["checks"]
    assert isinstance(checks, list)
    return checks


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


async def test_search_docs_returns_the_default_instruction_word_for_word(project: Path, tmp_path: Path) -> None:
    write_config(project, CONFIG)
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        result = await client.call_tool(
            "search_docs",
            {"docset": "react", "keywords": ["useEffect", "cleanup"], "generalized_keywords": ["hooks", "lifecycle"]},
        )
    assert not result.is_error
    local_path = f"{project.as_posix()}/.knowledge/docs/react-18.2/"
    assert text(result) == (
        f"Search for 'useEffect, cleanup' in folder {local_path}. Use your normal text search tools to do this. "
        "If the search results don't help you, try to find 'hooks, lifecycle'. "
        "If this still doesn't help, ask the user to rephrase it."
    )


async def test_aliases_and_custom_templates(project: Path, tmp_path: Path) -> None:
    write_config(project, CONFIG)
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        by_alias = await client.call_tool("search_docs", {"docset": "reactjs", "keywords": ["state"]})
        custom = await client.call_tool(
            "search_docs", {"docset": "vue", "keywords": ["ref", "reactive"], "generalized_keywords": ["state"]}
        )
    assert f"in folder {project.as_posix()}/.knowledge/docs/react-18.2/" in text(by_alias)
    assert text(custom) == (
        f"Look in {project.as_posix()}/.knowledge/docs/vue-3.4/ for ref, reactive (vue 3.4); else state. "
        "{unknown} {{keywords}}"
    )


async def test_errors_are_specific_and_name_the_fix(project: Path, tmp_path: Path) -> None:
    write_config(project, CONFIG)
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        unknown = await client.call_tool("search_docs", {"docset": "angular", "keywords": ["x"]})
        invalid = await client.call_tool("search_docs", {"docset": "../secrets", "keywords": ["x"]})
        empty = await client.call_tool("search_docs", {"docset": "react", "keywords": []})
        blank = await client.call_tool("search_docs", {"docset": "react", "keywords": ["ok", "  "]})
        too_many = await client.call_tool("search_docs", {"docset": "react", "keywords": ["k"] * (MAX_KEYWORDS + 1)})
        too_long = await client.call_tool("search_docs", {"docset": "react", "keywords": ["x" * 1000]})
        wrong_type = await client.call_tool("search_docs", {"docset": "react", "keywords": 5})
    assert all(r.is_error for r in (unknown, invalid, empty, blank, too_many, too_long, wrong_type))
    assert "no docset is called 'angular'" in text(unknown)
    assert "Available docsets: react (aliases: reactjs), vue" in text(unknown)
    assert "is not a valid docset name" in text(invalid) and "not" in text(invalid)
    assert not (project / ".knowledge" / "docs").exists()  # an invalid name touches nothing
    assert "keywords: give at least one keyword" in text(empty)
    assert "keywords[1]: is blank" in text(blank)
    assert f"give at most {MAX_KEYWORDS}" in text(too_many)
    assert "keywords[0]: is 1000 characters long" in text(too_long)
    assert "keywords" in text(wrong_type)


async def test_list_docsets_is_one_json_array(project: Path, tmp_path: Path) -> None:
    write_config(project, CONFIG)
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        result = await client.call_tool("list_docsets", {})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    docsets = json.loads(text(result))
    assert [d["name"] for d in docsets] == ["react", "vue"]
    assert docsets[0] == {
        "name": "react",
        "version": "18.2",
        "aliases": ["reactjs"],
        "local_path": f"{project.as_posix()}/.knowledge/docs/react-18.2/",
        "description": None,
        "web_sources": [],
    }
    assert docsets[1]["version"] == "3.4"
    schema = tools["list_docsets"].output_schema
    # tools/list leaves out a type that `items` already says (server/schemas.py)
    assert schema is not None and schema["properties"]["docsets"]["items"]["properties"]["local_path"] == {
        "type": "string"
    }
    assert result.structured_content == {"docsets": docsets}
    assert tools["list_docsets"].annotations is not None and tools["list_docsets"].annotations.read_only_hint
    assert tools["search_docs"].input_schema["required"] == ["docset", "keywords"]


async def test_list_docsets_with_no_docsets_is_empty(project: Path, tmp_path: Path) -> None:
    write_config(project, "docsets: []\n")
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        result = await client.call_tool("list_docsets", {})
    assert not result.is_error
    assert json.loads(text(result)) == []


async def test_without_a_config_the_tools_explain_how_to_create_one(project: Path, tmp_path: Path) -> None:
    host = docs_host(project, tmp_path / "data")
    assert [r.status for r in host.reports if r.name == "docs"] == ["loaded"]
    check = next(c for c in _checks(host) if c["name"] == "docs configuration")
    assert not check["ok"] and not check["required"]  # unconfigured: degraded, not fine
    assert "no .knowledge/config.yaml" in check["detail"] and "AGENTLOOM_DOCS__PROJECT_DIR" in check["detail"]
    async with Client(host.server) as client:
        result = await client.call_tool("list_docsets", {})
        assert result.is_error
        assert "no .knowledge/config.yaml found" in text(result) and "Create .knowledge/config.yaml" in text(result)
        assert "AGENTLOOM_DOCS__PROJECT_DIR" in text(result)
        write_config(project, CONFIG)  # appears later: picked up without a restart
        result = await client.call_tool("list_docsets", {})
        assert [d["name"] for d in json.loads(text(result))] == ["react", "vue"]


async def test_config_changes_are_seen_by_the_next_call(project: Path, tmp_path: Path) -> None:
    path = write_config(project, CONFIG)
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        await client.call_tool("list_docsets", {})
        # Same size, same coarse timestamp tick: only the content differs.
        path.write_text(CONFIG.replace('"18.2"', '"18.3"'))
        result = await client.call_tool("search_docs", {"docset": "react", "keywords": ["x"]})
        assert "react-18.3/" in text(result)

        path.write_text("docsets:\n  - name: react\n\tversion: broken\n")
        broken = await client.call_tool("list_docsets", {})
        assert broken.is_error and "YAML syntax error at line 3" in text(broken)

        path.write_text(CONFIG.replace("vue", "svelte"))
        old = time.time() - 60
        os.utime(path, (old, old))  # an old timestamp must not hide the change either
        recovered = await client.call_tool("list_docsets", {})
        assert [d["name"] for d in json.loads(text(recovered))] == ["react", "svelte"]


async def test_an_unreadable_config_is_a_file_access_error(project: Path, tmp_path: Path) -> None:
    write_config(project, "")
    (project / ".knowledge" / "config.yaml").write_bytes(b"docsets:\n  - name: \xff\xfe\n")
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        result = await client.call_tool("list_docsets", {})
    assert result.is_error and "not UTF-8 text" in text(result)


async def test_health_reports_the_configuration(project: Path, tmp_path: Path) -> None:
    write_config(project, CONFIG)
    host = docs_host(project, tmp_path / "data")
    checks = {c["name"]: c for c in _checks(host)}
    assert checks["docs configuration"]["ok"] and "2 docsets" in checks["docs configuration"]["detail"]


async def test_empty_generalized_keywords_do_not_ask_to_find_nothing(project: Path, tmp_path: Path) -> None:
    write_config(project, CONFIG)
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        result = await client.call_tool("search_docs", {"docset": "react", "keywords": ["useEffect"]})
    assert "''" not in text(result) and "try to find" not in text(result)
    assert text(result).startswith("Search for 'useEffect' in folder ")
    assert text(result).endswith("If this doesn't help, ask the user to rephrase it.")


async def test_a_web_docset_never_fetched_says_how_to_fetch_it(project: Path, tmp_path: Path) -> None:
    write_config(
        project,
        "docsets:\n  - name: fastapi\n    web_sources:\n      - type: git_repo\n"
        "        url: https://github.com/fastapi/fastapi.git\n",
    )
    async with Client(docs_host(project, tmp_path / "data").server) as client:
        result = await client.call_tool("search_docs", {"docset": "fastapi", "keywords": ["Depends"]})
        assert result.is_error and "has not been downloaded yet" in text(result)
        assert "agentic-knowledge init fastapi" in text(result)
        (project / ".knowledge/docsets/fastapi").mkdir(parents=True)
        fetched = await client.call_tool("search_docs", {"docset": "fastapi", "keywords": ["Depends"]})
    assert not fetched.is_error and "/.knowledge/docsets/fastapi/" in text(fetched)


async def test_a_server_started_elsewhere_finds_the_project_in_the_client_roots(project: Path, tmp_path: Path) -> None:
    from mcp_types import ListRootsResult, Root

    write_config(project, CONFIG)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def roots(context: object) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=project.as_uri(), name="project")])

    async with Client(
        docs_host(elsewhere, tmp_path / "data").server, list_roots_callback=roots, mode="legacy"
    ) as client:
        result = await client.call_tool("list_docsets", {})
    assert not result.is_error, text(result)
    assert [d["name"] for d in json.loads(text(result))] == ["react", "vue"]
