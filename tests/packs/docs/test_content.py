"""The content loader against real git repositories."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentloom.packs.docs.config import load_project
from agentloom.packs.docs.content import docset_status, load_docset
from tests.conftest import free_port
from tests.packs.docs.conftest import write_config
from tests.packs.docs.repos import COMMIT_TIME, PROJECT, SMART_SELECTION, Repo


def project_with(root: Path, sources: str):
    config = write_config(root, f"docsets:\n  - name: lib\n    web_sources:\n{sources}")
    project = load_project(config)
    return project, project.docsets[0]


def source(url: str, extra: str = "") -> str:
    return f"      - type: git_repo\n        url: {url}\n{extra}"


def files_under(folder: Path) -> list[str]:
    return sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".agentic")
    )


def test_smart_filter_keeps_docs_and_drops_the_rest(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    project, docset = project_with(tmp_path / "p", source(repo.url))
    result = load_docset(project, docset)
    assert result.ok and result.sources[0].changed
    assert result.sources[0].files == SMART_SELECTION  # an explicit list, not patterns
    assert files_under(docset.path) == SMART_SELECTION
    assert docset.path == tmp_path / "p" / ".knowledge" / "docsets" / "lib"
    assert (docset.path / "docs/conf.py").read_text() == PROJECT["docs/conf.py"]  # unmodified
    assert int((docset.path / "README.md").stat().st_mtime) == COMMIT_TIME  # the commit's time
    assert (tmp_path / "p" / ".knowledge" / ".gitignore").read_text() == "docsets/\n"
    meta = json.loads((docset.path / ".agentic-metadata.json").read_text())
    entry = meta["sources"][0]
    assert entry["url"] == repo.url and entry["files"] == SMART_SELECTION and len(entry["content_hash"]) == 64
    assert entry["last_fetched"] and entry["commit"] and entry["error"] is None


def test_explicit_paths_take_exactly_those(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    project, docset = project_with(
        tmp_path / "p", source(repo.url, "        paths: [src/docs, LICENSE, docs/logo.png]\n")
    )
    result = load_docset(project, docset)
    assert result.ok and files_under(docset.path) == ["LICENSE", "docs/logo.png", "src/docs/internal.md"]


def test_a_missing_path_lists_what_the_repository_has(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x", "docs/a.md": "a"})
    project, docset = project_with(tmp_path / "p", source(repo.url, "        paths: [manual]\n"))
    result = load_docset(project, docset)
    assert not result.ok
    assert "not in the repository: manual. It has: README.md, docs/" in result.sources[0].error  # type: ignore[operator]  # the source failed: its error is set


def test_a_missing_branch_lists_the_branches(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    repo.branch_off("v2", {"docs/v2.md": "two"})
    project, docset = project_with(tmp_path / "p", source(repo.url, "        branch: v3\n"))
    error = load_docset(project, docset).sources[0].error
    assert error is not None and "branch 'v3' does not exist. Branches: main, v2" in error
    project, docset = project_with(tmp_path / "p", source(repo.url, "        branch: v2\n"))
    assert "docs/v2.md" in load_docset(project, docset).sources[0].files


def test_no_documentation_warns_and_suggests_paths(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"src/main.py": "x", "Makefile": "all:"})
    project, docset = project_with(tmp_path / "p", source(repo.url))
    result = load_docset(project, docset).sources[0]
    assert result.ok and result.files == [] and result.warning and "configure `paths:`" in result.warning


def test_failures_name_their_cause_and_one_failure_does_not_stop_the_others(tmp_path: Path) -> None:
    good = Repo(tmp_path / "good", {"README.md": "good"})
    closed = f"http://127.0.0.1:{free_port()}/repo.git"
    with AuthServer() as auth:
        sources = "".join(source(u) for u in (tmp_path.joinpath("nowhere.git").as_uri(), closed, auth.url, good.url))
        project, docset = project_with(tmp_path / "p", sources)
        result = load_docset(project, docset)
    errors = [s.error for s in result.sources]
    assert "no repository at this URL" in errors[0]  # type: ignore[operator]  # the source failed: its error is set
    assert "Check your internet connection" in errors[1]  # type: ignore[operator]  # the source failed: its error is set
    assert "authentication failed. Check your git credentials" in errors[2]  # type: ignore[operator]  # the source failed: its error is set
    assert errors[3] is None and (docset.path / "README.md").read_text() == "good"
    assert not result.ok
    statuses = docset_status(docset)
    assert [s.error is None for s in statuses] == [False, False, False, True]
    assert statuses[3].file_count == 1 and statuses[0].last_fetched is None


def test_not_enough_disk_space_is_reported_before_downloading(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    project, docset = project_with(tmp_path / "p", source(repo.url))
    result = load_docset(project, docset, min_free_bytes=2**62)
    assert result.sources[0].error is not None
    assert (
        "not enough disk space" in result.sources[0].error
        and "AGENTIC_KNOWLEDGE_MIN_FREE_MB" in result.sources[0].error
    )
    assert files_under(docset.path) == []


def test_refresh_rewrites_only_what_changed(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "one", "docs/a.md": "a", "docs/b.md": "b"})
    project, docset = project_with(tmp_path / "p", source(repo.url))
    load_docset(project, docset)
    (docset.path / "mine.md").write_text("the user's own file")
    os.utime(docset.path / "docs/a.md", (1000, 1000))
    first = json.loads((docset.path / ".agentic-metadata.json").read_text())["sources"][0]

    unchanged = load_docset(project, docset).sources[0]
    assert not unchanged.changed and (docset.path / "docs/a.md").stat().st_mtime == 1000

    repo.commit({"docs/b.md": "b2", "docs/c.md": "c"}, delete=("docs/a.md",))
    changed = load_docset(project, docset).sources[0]
    assert changed.changed
    assert files_under(docset.path) == ["README.md", "docs/b.md", "docs/c.md", "mine.md"]
    assert (docset.path / "docs/b.md").read_text() == "b2"
    second = json.loads((docset.path / ".agentic-metadata.json").read_text())["sources"][0]
    assert second["content_hash"] != first["content_hash"] and second["commit"] != first["commit"]
    assert second["last_fetched"] >= first["last_fetched"]


def test_corrupt_metadata_is_backed_up_and_rebuilt(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    project, docset = project_with(tmp_path / "p", source(repo.url))
    docset.path.mkdir(parents=True)
    (docset.path / ".agentic-metadata.json").write_text("{not json")
    assert docset_status(docset)[0].last_fetched is None  # reading never fails
    assert load_docset(project, docset).ok
    assert json.loads((docset.path / ".agentic-metadata.json").read_text())["sources"][0]["files"] == ["README.md"]
    assert list(docset.path.glob(".agentic-metadata.json.corrupt-*"))


def test_an_existing_gitignore_is_kept_and_extended(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    project, docset = project_with(tmp_path / "p", source(repo.url))
    (project.knowledge_dir / ".gitignore").write_text("secrets.yaml")
    load_docset(project, docset)
    load_docset(project, docset)
    assert (project.knowledge_dir / ".gitignore").read_text() == "secrets.yaml\ndocsets/\n"


@pytest.mark.parametrize("url", ["--upload-pack=touch /tmp/pwned", "ext::sh -c touch% /tmp/pwned"])
def test_dangerous_urls_never_reach_git(tmp_path: Path, url: str) -> None:
    from agentloom.packs.docs.config import GitRepoSource
    from agentloom.packs.docs.content import GitRepoLoader, SourceError

    loader = GitRepoLoader(GitRepoSource.model_construct(type="git_repo", url=url, branch=None, paths=None))
    with pytest.raises(SourceError, match="invalid repository URL"):
        loader.clone(tmp_path / "x")
    assert not (tmp_path / "x").exists() and not Path("/tmp/pwned").exists()


class AuthServer:
    """An HTTP git host that wants credentials: every request gets 401."""

    def __enter__(self) -> AuthServer:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/private.git"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
