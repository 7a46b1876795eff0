"""The docs pack's content loader against hostile repositories, metadata and folders.

Everything here is real: git repositories made in the test and served over file://, a
loopback HTTPS server with a certificate made in the test, a loopback server that never
answers. Nothing needs the internet.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import resource
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Self

import pytest

from agentloom.packs.docs.config import GitRepoSource, load_project
from agentloom.packs.docs.content import GitRepoLoader, SourceError, load_docset, repository, state
from agentloom.packs.docs.content.safefs import Folder, UnsafePath, path_problem
from tests.conftest import PYTHON
from tests.packs.docs.conftest import write_config
from tests.packs.docs.repos import COMMIT_TIME, Link, Repo, empty_repo, git

CLI = str(Path(PYTHON).with_name("agentic-knowledge"))


def web_docset(root: Path, *urls: str, extra: str = "", source_extra: str = "") -> tuple:  # type: ignore[type-arg]
    sources = "".join(f"      - type: git_repo\n        url: {u}\n{source_extra}" for u in urls)
    config = write_config(root, f"docsets:\n  - name: lib\n{extra}    web_sources:\n{sources}")
    project = load_project(config)
    return project, project.docsets[0]


def write_metadata(folder: Path, sources: list[dict]) -> None:  # type: ignore[type-arg]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".agentic-metadata.json").write_text(json.dumps({"version": 1, "docset": "lib", "sources": sources}))


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "1000"}  # rich folds long paths at the terminal width
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env, check=False)


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


# -- deletion through metadata -----------------------------------------------------------


@pytest.mark.slow
def test_metadata_cannot_make_init_delete_files_outside_the_docset(tmp_path: Path) -> None:
    victim, absolute = tmp_path / "victim.txt", tmp_path / "also-victim.txt"
    victim.write_text("precious")
    absolute.write_text("precious too")
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    project = tmp_path / "p"
    write_config(
        project, f"docsets:\n  - name: lib\n    web_sources:\n      - type: git_repo\n        url: {repo.url}\n"
    )
    docset = project / ".knowledge" / "docsets" / "lib"
    # As a cloned repository could bring it: an entry for the configured source and one for a source no
    # longer configured (both paths of deletion), each naming files far outside the docset folder.
    write_metadata(
        docset,
        [
            {"url": repo.url, "files": ["README.md", "../../../../victim.txt", str(absolute)]},
            {"url": (tmp_path / "gone.git").as_uri(), "files": ["../../../../victim.txt", str(absolute)]},
        ],
    )

    done = cli(project, "init", "lib")

    assert victim.read_text() == "precious" and absolute.read_text() == "precious too"
    assert done.returncode == 0, done.stdout + done.stderr
    out = flat(done.stdout)
    assert "refused the entry '../../../../victim.txt'" in out and f"refused the entry '{absolute}'" in out
    assert (docset / "README.md").read_text() == "# lib"
    entry = json.loads((docset / ".agentic-metadata.json").read_text())["sources"]
    assert [e["files"] for e in entry] == [["README.md"]]  # the refused names are not written back


def test_metadata_naming_a_path_through_a_link_in_the_docset_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.md").write_text("precious")
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    project, docset = web_docset(tmp_path / "p", repo.url)
    docset.path.mkdir(parents=True)
    (docset.path / "docs").symlink_to(outside)
    write_metadata(docset.path, [{"url": repo.url, "files": ["docs/victim.md"]}])

    result = load_docset(project, docset)

    assert (outside / "victim.md").read_text() == "precious"
    assert any(
        "refused the entry 'docs/victim.md'" in w and "leads outside the docset folder" in w for w in result.warnings
    )


def test_deletion_checks_for_links_when_unlinking_not_only_when_reading_metadata(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "docs/a.md": "a"})
    project, docset = web_docset(tmp_path / "p", repo.url)
    assert load_docset(project, docset).ok
    outside = tmp_path / "outside"
    other = Repo(tmp_path / "other", {"README.md": "# other"})
    project, docset = web_docset(tmp_path / "p", other.url)  # the first source is removed from the config

    read = state.read

    def read_then_swap(folder: Path, name: str) -> state.Metadata:
        metadata = read(folder, name)  # checked here: docs/a.md is inside the docset
        (folder / "docs").rename(outside)  # ...and then docs/ becomes a link to another folder
        (folder / "docs").symlink_to(outside)
        return metadata

    monkeypatch.setattr(state, "read", read_then_swap)
    result = load_docset(project, docset)

    assert (outside / "a.md").read_text() == "a"
    assert any("docs in the docset folder" in w and "symbolic link" in w for w in result.warnings)


def test_a_refresh_deletes_only_files_it_wrote(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "docs/a.md": "a", "docs/b.md": "b"})
    project, docset = web_docset(tmp_path / "p", repo.url)
    assert load_docset(project, docset).ok
    (docset.path / "mine.md").write_text("the user's own notes")
    (docset.path / "docs/b.md").write_text("b, edited by the user")
    meta = json.loads((docset.path / ".agentic-metadata.json").read_text())
    meta["sources"][0]["files"].append("mine.md")  # someone lists a file the loader never wrote
    (docset.path / ".agentic-metadata.json").write_text(json.dumps(meta))

    repo.commit({"docs/c.md": "c"}, delete=("docs/a.md", "docs/b.md"))
    result = load_docset(project, docset)

    assert result.ok
    assert not (docset.path / "docs/a.md").exists()  # written by the loader, unchanged: removed
    assert (docset.path / "mine.md").read_text() == "the user's own notes"
    assert (docset.path / "docs/b.md").read_text() == "b, edited by the user"
    warnings = "\n".join(result.warnings)
    assert "kept mine.md" in warnings and "kept docs/b.md" in warnings and "changed since it was fetched" in warnings


# -- symbolic links ----------------------------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "secret.md").write_text("SECRET")
    return folder


def docs_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_an_explicit_path_that_is_a_link_is_refused_and_named(tmp_path: Path, secret: Path) -> None:
    repo = Repo(
        tmp_path / "repo",
        {
            "README.md": "# lib",
            "docs/passwd.md": Link("/etc/passwd"),
            "docs/secret.md": Link(str(secret / "secret.md")),
        },
    )
    for wanted in ("docs/passwd.md", "docs/secret.md"):
        project, docset = web_docset(tmp_path / "p", repo.url, source_extra=f"        paths: [{wanted}]\n")
        result = load_docset(project, docset).sources[0]
        assert not result.ok and f"{wanted} is a symbolic link in the repository" in result.error  # type: ignore[operator]
        assert "links are never followed" in result.error  # type: ignore[operator]
    assert "SECRET" not in docs_text(docset.path) and "root:" not in docs_text(docset.path)


def test_a_linked_folder_does_not_bring_another_folders_files(tmp_path: Path, secret: Path) -> None:
    repo = Repo(
        tmp_path / "repo",
        {
            "README.md": "# lib",
            "manual": Link(str(secret)),
            "guide/intro.md": "# intro",
            "guide/extra": Link(str(secret)),
            "docs/readme.md": Link(str(secret / "secret.md")),
        },
    )
    project, docset = web_docset(tmp_path / "p", repo.url, source_extra="        paths: [manual/secret.md]\n")
    error = load_docset(project, docset).sources[0].error
    assert error and "manual (on the way to manual/secret.md) is a symbolic link in the repository" in error

    project, docset = web_docset(tmp_path / "p", repo.url, source_extra="        paths: [manual]\n")
    assert "manual is a symbolic link" in (load_docset(project, docset).sources[0].error or "")

    project, docset = web_docset(tmp_path / "p", repo.url, source_extra="        paths: [guide]\n")
    walked = load_docset(project, docset).sources[0]
    assert walked.ok and walked.files == ["guide/intro.md"]
    assert f"guide/extra -> {secret}" in (walked.warning or "")

    project, docset = web_docset(tmp_path / "p", repo.url)  # the smart filter names what it skipped
    smart = load_docset(project, docset).sources[0]
    assert smart.ok and "docs/readme.md" not in smart.files
    assert f"docs/readme.md -> {secret / 'secret.md'}" in (smart.warning or "")
    assert "SECRET" not in docs_text(docset.path)


def test_a_link_inside_the_docset_folder_is_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "docs/index.md": "# index"})
    project, docset = web_docset(tmp_path / "p", repo.url)
    docset.path.mkdir(parents=True)
    (docset.path / "docs").symlink_to(elsewhere)

    result = load_docset(project, docset).sources[0]

    assert list(elsewhere.iterdir()) == []
    assert (
        not result.ok and f"docs in the docset folder {docset.path} is a symbolic link (to {elsewhere})" in result.error
    )  # type: ignore[operator]


def test_a_linked_gitignore_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("export A=1\n")
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    project, docset = web_docset(tmp_path / "p", repo.url)
    (project.knowledge_dir / ".gitignore").symlink_to(victim)

    result = load_docset(project, docset)

    assert victim.read_text() == "export A=1\n"
    assert result.ok and any(".gitignore is a symbolic link" in w for w in result.warnings)


# -- where web sources may write ---------------------------------------------------------


@pytest.mark.slow
def test_web_sources_write_only_inside_the_project_unless_the_docset_allows_it(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    elsewhere = tmp_path / "elsewhere"
    project, docset = web_docset(tmp_path / "p", repo.url, extra=f"    local_path: {elsewhere}\n")
    result = load_docset(project, docset)
    assert not elsewhere.exists()
    assert not result.ok and "is outside the project folder" in result.sources[0].error  # type: ignore[operator]
    assert "allow_outside_project: true" in result.sources[0].error  # type: ignore[operator]

    project, docset = web_docset(
        tmp_path / "p", repo.url, extra=f"    local_path: {elsewhere}\n    allow_outside_project: true\n"
    )
    assert load_docset(project, docset).ok and (elsewhere / "README.md").read_text() == "# lib"

    write_config(tmp_path / "p", f"docsets:\n  - name: local\n    local_path: {tmp_path / 'anywhere'}\n")
    local = cli(tmp_path / "p", "init", "local")  # a local-only docset may still point anywhere
    assert local.returncode == 0 and (tmp_path / "anywhere").is_dir()


@pytest.mark.parametrize("local_path", [".", ".knowledge", ".git", ".git/hooks", "..", "../p-sibling"])
def test_web_sources_never_write_into_the_project_root_git_or_knowledge_folder(tmp_path: Path, local_path: str) -> None:
    repo = Repo(
        tmp_path / "repo",
        {"README.md": "# lib", "config": "[core]\n\tfsmonitor = touch /tmp/x\n"},
    )
    root = tmp_path / "p"
    (root / ".git").mkdir(parents=True)
    project, docset = web_docset(
        root, repo.url, extra=f"    local_path: {local_path}\n", source_extra="        paths: [README.md, config]\n"
    )
    result = load_docset(project, docset)
    assert not result.ok and not (root / "README.md").exists() and not (root / ".git" / "config").exists()
    assert not (root / ".knowledge" / "README.md").exists() and not (tmp_path / "README.md").exists()
    assert not (tmp_path / "p-sibling").exists()


@pytest.mark.slow
def test_a_docset_folder_linked_outside_the_project_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    _, docset = web_docset(tmp_path / "p", repo.url)
    docset.path.parent.mkdir(parents=True)
    docset.path.symlink_to(elsewhere)  # .knowledge/docsets/lib -> elsewhere, as a repository could commit it

    done = cli(tmp_path / "p", "init", "lib")

    assert list(elsewhere.iterdir()) == []
    assert done.returncode == 1
    assert f"through the symbolic link {docset.path} -> {elsewhere}" in flat(done.stdout)


# -- git itself --------------------------------------------------------------------------


def test_git_not_installed_says_so(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    project, docset = web_docset(tmp_path / "p", repo.url)
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    error = load_docset(project, docset).sources[0].error
    assert error and "git is not installed" in error and "apt-get install git" in error


def test_an_empty_repository_says_so(tmp_path: Path) -> None:
    url = empty_repo(tmp_path / "remote")
    for extra in ("", "        branch: main\n"):
        project, docset = web_docset(tmp_path / "p", url, source_extra=extra)
        result = load_docset(project, docset).sources[0]
        assert not result.ok and "the repository is empty" in result.error and "push a commit" in result.error  # type: ignore[operator]


def test_a_missing_default_branch_lists_the_branches(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"}, branch="master")
    repo.branch_off("v2", {"docs/v2.md": "two"})
    repo.set_default_branch("main")  # HEAD names a branch nobody pushed
    project, docset = web_docset(tmp_path / "p", repo.url)
    result = load_docset(project, docset).sources[0]
    assert not result.ok
    assert "default branch (its HEAD) does not exist" in result.error and "Branches: master, v2" in result.error  # type: ignore[operator]
    assert "set `branch:`" in result.error  # type: ignore[operator]


def test_git_runs_in_its_own_session_with_only_the_allowed_protocols(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen.json"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"json.dump({{'pid': os.getpid(), 'sid': os.getsid(0), 'env': dict(os.environ)}}, open({str(seen)!r}, 'w'))\n"
        "sys.stderr.write('fatal: repository not found\\n')\n"
        "sys.exit(128)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("GIT_ALLOW_PROTOCOL", raising=False)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "another-repo"))
    loader = GitRepoLoader(GitRepoSource(type="git_repo", url="https://example.org/x.git"), timeout=30)
    with pytest.raises(SourceError, match="no repository at this URL"):
        loader.clone(tmp_path / "clone")
    run = json.loads(seen.read_text())
    assert run["sid"] == run["pid"]  # a session (and process group) of its own: no terminal, killable as one
    assert run["env"]["GIT_ALLOW_PROTOCOL"] == "file:git:http:https:ssh" and "GIT_DIR" not in run["env"]
    assert run["env"]["GIT_TERMINAL_PROMPT"] == "0"

    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "https:ssh:ext")  # a user's narrower list stays narrow, ext never
    with pytest.raises(SourceError):
        loader.clone(tmp_path / "clone")
    assert json.loads(seen.read_text())["env"]["GIT_ALLOW_PROTOCOL"] == "https:ssh"


class SilentServer:
    """Accepts connections and never answers: git's HTTP helper waits forever."""

    def __enter__(self) -> Self:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                continue

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for conn in self.conns:
            conn.close()
        self.sock.close()


def processes_mentioning(text: str) -> list[str]:
    """Live (not zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and status != "Z":
            found.append(f"{entry.name} {cmdline}")
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc to see git's helper processes")
@pytest.mark.timeout(60)  # a timeout that never fires fails here, not at the suite's 300 s
def test_a_timeout_kills_git_and_its_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SilentServer() as server:
        url = f"http://127.0.0.1:{server.port}/never.git"
        loader = GitRepoLoader(GitRepoSource(type="git_repo", url=url), timeout=1.5)
        readings: list[float] = []

        def clock() -> float:  # the loader's own clock, read through
            readings.append(time.monotonic())
            return readings[-1]

        monkeypatch.setattr(repository, "time", SimpleNamespace(monotonic=clock, time=time.time))
        with pytest.raises(SourceError) as err:
            loader.clone(tmp_path / "clone")
        monkeypatch.undo()
        assert str(err.value) == (
            f"{url}: git took longer than 1.5 s and was stopped; check your internet connection "
            "and retry, or raise AGENTIC_KNOWLEDGE_GIT_TIMEOUT (seconds)"
        )
        # Stopped when its own clock passed the timeout, not before (a hang meets the test's timeout).
        assert readings[-1] >= readings[0] + 1.5
        deadline = time.monotonic() + 30
        while processes_mentioning(f"127.0.0.1:{server.port}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_mentioning(f"127.0.0.1:{server.port}") == []  # git-remote-http is gone too


@pytest.mark.timeout(90)
def test_the_timeout_setting_is_read_when_loading(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", "1.5")
    with SilentServer() as server:
        project, docset = web_docset(tmp_path / "p", f"http://127.0.0.1:{server.port}/never.git")
        error = load_docset(project, docset).sources[0].error  # the default (minutes) would meet the timeout
    assert error and "took longer than 1.5 s" in error and "AGENTIC_KNOWLEDGE_GIT_TIMEOUT" in error


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself, made now (cryptography, else the openssl CLI)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            if os.environ.get("CI"):
                pytest.fail("the TLS test needs the cryptography package or the openssl command")
            pytest.skip("neither the cryptography package nor the openssl command is available")
        subprocess.run(
            [
                openssl,
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[str]:
    cert, key = self_signed_certificate(tmp_path)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda *args: None  # type: ignore[method-assign]  # the client hangs up mid-handshake
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/repo.git"
    finally:
        server.shutdown()
        server.server_close()


def test_an_untrusted_certificate_is_named_with_the_fix(tmp_path: Path, https_server: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name in ("GIT_SSL_NO_VERIFY", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)  # no user setting may switch verification off
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    project, docset = web_docset(tmp_path / "p", https_server)
    error = load_docset(project, docset).sources[0].error
    assert error and f"{https_server}: TLS certificate verification failed" in error
    assert "http.sslCAInfo" in error and "never switched off" in error


# -- safefs: the folder walker itself, on real files and links -----------------------------


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is not a file name"),
        (None, "is not a file name"),
        (7, "is not a file name"),
        ("a\0b", "contains a NUL character"),
        ("/etc/passwd", "is an absolute path"),
        ("C:evil", "is an absolute path"),
        ("\\\\server\\share", "is an absolute path"),
        ("\\root", "is an absolute path"),
        ("..", "climbs out of the folder with '..'"),
        ("docs/../../x", "climbs out of the folder with '..'"),
        ("docs//a.md", "is not a plain relative path"),
        ("./a.md", "is not a plain relative path"),
        ("docs/", "is not a plain relative path"),
        ("docs/.", "is not a plain relative path"),
        ("docs/a.md", None),
        ("a", None),
        ("...", None),
        ("a..b/.hidden", None),
    ],
)
def test_path_problem_names_each_kind_of_bad_path(name: object, problem: str | None) -> None:
    assert path_problem(name) == problem


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A folder with a file, a subfolder, and links to a file and a folder outside it."""
    root = tmp_path / "tree"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("A")
    (root / "file").write_text("F")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("SECRET")
    (root / "link.md").symlink_to(tmp_path / "outside" / "secret.md")
    (root / "dlink").symlink_to(tmp_path / "outside")
    return root


def test_a_folder_reads_only_regular_files_below_it(tree: Path, tmp_path: Path) -> None:
    before = open_fds()
    with Folder(tree, "the repository", "Name real files.") as repo:
        assert repo.file_hash("docs/a.md") == hashlib.sha256(b"A").hexdigest()
        assert repo.file_hash("missing.md") is None and repo.file_hash("nowhere/missing.md") is None
        with pytest.raises(FileNotFoundError):
            repo.open_file("missing.md")
        cases = {
            "link.md": f"link.md in the repository is a symbolic link (to {tmp_path / 'outside' / 'secret.md'}); "
            "links are never followed. Name real files.",
            "dlink/secret.md": f"dlink in the repository is a symbolic link (to {tmp_path / 'outside'}); links are "
            "never followed. Name real files.",
            "docs": "docs in the repository is not a regular file; Name real files.",
            "file/x.md": "file in the repository is a file where a folder is needed; Name real files.",
            "docs/a.md/x": "docs/a.md in the repository is a file where a folder is needed; Name real files.",
            "docs/a.md/x/y.md": "docs/a.md in the repository is a file where a folder is needed; Name real files.",
            "../tree/file": "'../tree/file' climbs out of the folder with '..'; only paths inside the repository are "
            "used",
            "/etc/passwd": "'/etc/passwd' is an absolute path; only paths inside the repository are used",
        }
        for name, message in cases.items():
            with pytest.raises(UnsafePath) as err:
                repo.open_file(name)
            assert str(err.value) == message
        assert stat.S_ISLNK(repo.lstat("link.md").st_mode)  # type: ignore[union-attr]  # the link itself
        assert stat.S_ISREG(repo.lstat("docs/a.md").st_mode)  # type: ignore[union-attr]
        assert stat.S_ISDIR(repo.lstat("docs").st_mode)  # type: ignore[union-attr]
        assert repo.lstat("docs/none.md") is None and repo.lstat("none/none.md") is None
        assert not (tree / "none").exists() and not (tree / "nowhere").exists()  # reading makes no folder
        with pytest.raises(UnsafePath, match="dlink in the repository is a symbolic link"):
            repo.lstat("dlink/secret.md")
        fd = repo.fd
        assert fd >= 0
    assert repo.fd == -1
    repo.close()  # closing twice is harmless
    assert repo.fd == -1
    assert open_fds() == before  # every descriptor opened on the way was closed
    with pytest.raises(NotADirectoryError):
        Folder(tree / "file", "x", "y")
    assert open_fds() == before


def test_staging_copies_the_file_beside_its_name_then_commit_puts_it_in_place(tmp_path: Path) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)  # several reads and writes
    long_name = "n" * 150 + ".md"
    source = tmp_path / "repo"
    (source / "deep" / "er").mkdir(parents=True)
    (source / "deep" / "er" / "big.bin").write_bytes(big)
    (source / "docs").mkdir()
    (source / "docs" / long_name).write_text("long")
    dest_root = tmp_path / "dest"
    dest_root.mkdir()
    umask = os.umask(0o022)
    os.umask(umask)
    before = open_fds()
    with Folder(source, "the repository", "fix-r") as repo, Folder(dest_root, "the docset folder", "fix-d") as dest:
        staged = dest.stage("deep/er/big.bin", repo, 1_700_000_000.0)
        assert staged.name == "deep/er/big.bin"
        assert re.fullmatch(r"\.big\.bin\.[0-9a-f]{12}\.tmp", staged.temp)
        temp = dest_root / "deep" / "er" / staged.temp
        assert temp.read_bytes() == big and not (dest_root / "deep" / "er" / "big.bin").exists()
        assert temp.stat().st_mtime == 1_700_000_000.0
        for folder in (dest_root / "deep", dest_root / "deep" / "er"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask
        dest.commit(staged)
        assert (dest_root / "deep" / "er" / "big.bin").read_bytes() == big
        assert not temp.exists()
        assert stat.S_IMODE((dest_root / "deep" / "er" / "big.bin").stat().st_mode) == 0o666 & ~umask
        assert dest.file_hash("deep/er/big.bin") == hashlib.sha256(big).hexdigest()
        again = dest.stage("deep/er/big.bin", repo, 5.0)  # over an existing regular file: fine
        dest.commit(again)
        assert (dest_root / "deep" / "er" / "big.bin").stat().st_mtime == 5.0

        staged = dest.stage(f"docs/{long_name}", repo, 0.0)
        assert re.fullmatch(
            r"\." + "n" * 100 + r"\.[0-9a-f]{12}\.tmp", staged.temp
        )  # the name is cut to 100 characters
        dest.discard(staged)
        assert list((dest_root / "docs").iterdir()) == []
        dest.discard(staged)  # already gone: nothing to do
        dest.discard(type(staged)("nowhere/x.md", ".x.tmp"))  # its folder is gone too
        dest.discard(type(staged)("../x.md", ".x.tmp"))  # a name that was never valid
    assert open_fds() == before


def test_staging_and_committing_never_write_through_a_link(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    for name in ("a.md", "linked/a.md", "plain/a.md", "sub", "b.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(name)
    dest_root = tmp_path / "dest"
    (dest_root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("SECRET")
    (dest_root / "linked").symlink_to(outside)
    (dest_root / "a.md").symlink_to(outside / "secret.md")
    (dest_root / "plain").write_text("a file")
    before = open_fds()
    with (
        Folder(source, "the repository", "fix-r") as repo,
        Folder(dest_root, "the docset folder", "Remove it.") as dest,
    ):
        cases = {
            "a.md": f"a.md in the docset folder is a symbolic link (to {outside / 'secret.md'}); links are never "
            "followed. Remove it.",
            "linked/a.md": f"linked in the docset folder is a symbolic link (to {outside}); links are never followed. "
            "Remove it.",
            "plain/a.md": "plain in the docset folder is a file where a folder is needed; Remove it.",
            "sub": "sub in the docset folder is not a regular file; Remove it.",
        }
        for name, message in cases.items():
            with pytest.raises(UnsafePath) as err:
                dest.stage(name, repo, 0.0)
            assert str(err.value) == message
        # a link planted between staging and committing is refused, never followed
        staged = dest.stage("b.md", repo, 0.0)
        (dest_root / "b.md").symlink_to(outside / "secret.md")
        with pytest.raises(UnsafePath) as err:
            dest.commit(staged)
        assert str(err.value) == (
            f"b.md in the docset folder is a symbolic link (to {outside / 'secret.md'}); links "
            "are never followed. Remove it."
        )
        (dest_root / "b.md").unlink()
        (dest_root / "b.md").mkdir()
        with pytest.raises(UnsafePath) as err:
            dest.commit(staged)
        assert str(err.value) == "b.md in the docset folder is not a regular file; Remove it."
    assert (outside / "secret.md").read_text() == "SECRET" and sorted(p.name for p in outside.iterdir()) == [
        "secret.md"
    ]
    assert sorted(p.name for p in dest_root.iterdir() if p.name.endswith(".tmp")) == [staged.temp]  # only the last one
    assert open_fds() == before


def test_remove_deletes_only_the_file_that_was_written_and_prunes_empty_folders(tmp_path: Path) -> None:
    root = tmp_path / "docset"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "x.md").write_text("x")
    (root / "a" / "keep.md").write_text("keep")
    (root / "a" / "b" / "changed.md").write_text("new")
    (root / "dir").mkdir()
    (tmp_path / "target.md").write_text("T")
    (root / "link.md").symlink_to(tmp_path / "target.md")
    (root / "linked").symlink_to(tmp_path)
    sha = hashlib.sha256(b"x").hexdigest()
    before = open_fds()
    with Folder(root, "the docset folder", "Fix.") as dest:
        assert dest.remove("a/b/changed.md", hashlib.sha256(b"old").hexdigest()) == "it changed since it was fetched"
        assert dest.remove("a/b/changed.md", None) == (
            "the metadata does not record what was written there, so it may not be ours to delete"
        )
        assert dest.remove("link.md", sha) == (
            f"it is a symbolic link (to {tmp_path / 'target.md'}), which is never written here, so not ours to delete"
        )
        assert dest.remove("dir", sha) == "it is not a regular file, so not ours to delete"
        assert dest.remove("linked/target.md", hashlib.sha256(b"T").hexdigest()) == (
            f"linked in the docset folder is a symbolic link (to {tmp_path}); links are never followed. Fix."
        )
        assert (
            dest.remove("a/keep.md/x", sha) == "a/keep.md in the docset folder is a file where a folder is needed; Fix."
        )
        assert (
            dest.remove("../x.md", sha)
            == "'../x.md' climbs out of the folder with '..'; only paths inside the docset folder are used"
        )
        assert dest.remove("gone.md", sha) is None and dest.remove("gone/gone.md", sha) is None
        assert not (root / "gone").exists()  # removing makes no folder
        assert dest.remove("a/b/c/x.md", sha) is None
        assert not (root / "a" / "b" / "c").exists()  # left empty: pruned
        assert (root / "a" / "b").is_dir() and (root / "a" / "keep.md").exists()  # not empty: kept
        (root / "a" / "b" / "changed.md").write_text("x")
        assert dest.remove("a/b/changed.md", sha) is None
        assert not (root / "a" / "b").exists() and (root / "a").is_dir()
        (root / "top.md").write_text("x")
        assert dest.remove("top.md", sha) is None and not (root / "top.md").exists()
        (root / "solo" / "deeper").mkdir(parents=True)
        (root / "solo" / "deeper" / "x.md").write_text("x")
        assert dest.remove("solo/deeper/x.md", sha) is None
        assert not (root / "solo").exists()  # every folder left empty, up to the top one
    assert root.is_dir() and (tmp_path / "target.md").read_text() == "T"
    assert open_fds() == before


# -- the git loader's pieces: settings, environment, progress, and each failure's message ---

ACCEPTED_URLS = (
    "https://host/owner/repo.git, ssh://git@host/owner/repo.git, git@host:owner/repo.git or file:///path/to/repo"
)


def loader_for(
    url: str = "https://e.org/x.git",
    branch: str | None = None,
    paths: tuple[str, ...] | None = None,
    timeout: float = 30,
) -> GitRepoLoader:
    return GitRepoLoader(GitRepoSource(type="git_repo", url=url, branch=branch, paths=paths), timeout=timeout)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("", 300.0), ("  ", 300.0), ("12.5", 12.5), (" 7 ", 7.0), ("0", 300.0), ("-3", 300.0), ("0.01", 0.01)],
)
def test_the_git_timeout_setting(monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float) -> None:
    monkeypatch.setenv("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", raw)
    assert repository.git_timeout() == seconds
    assert GitRepoLoader(GitRepoSource(type="git_repo", url="https://e.org/x.git")).timeout == seconds
    assert GitRepoLoader(GitRepoSource(type="git_repo", url="https://e.org/x.git"), timeout=4.0).timeout == 4.0


def test_a_git_timeout_that_is_no_number_is_named_and_ignored(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", raising=False)
    assert repository.git_timeout() == 300.0 and not caplog.records
    monkeypatch.setenv("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", "ten")
    with caplog.at_level("WARNING", logger="agentloom.packs.docs.content"):
        assert repository.git_timeout() == 300.0
    assert [r.getMessage() for r in caplog.records] == [
        "AGENTIC_KNOWLEDGE_GIT_TIMEOUT='ten' is not a number of seconds; using 300"
    ]


def test_git_gets_no_prompt_english_messages_and_only_the_allowed_transports(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_COMMON_DIR",
    ):
        monkeypatch.setenv(name, "/elsewhere")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("KEEP_ME", "yes")
    monkeypatch.delenv("GIT_ALLOW_PROTOCOL", raising=False)
    env = repository._env()
    assert env == {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        **{k: v for k, v in os.environ.items() if k.startswith("GIT_") and v != "/elsewhere"},
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        "LANGUAGE": "C",
        "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    }
    assert env["KEEP_ME"] == "yes" and "GIT_DIR" not in env and "GIT_COMMON_DIR" not in env
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "ssh:ext:https")
    assert repository._env()["GIT_ALLOW_PROTOCOL"] == "https:ssh"  # ours in our order, never more
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "ext")
    assert repository._env()["GIT_ALLOW_PROTOCOL"] == "none"
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "")
    assert repository._env()["GIT_ALLOW_PROTOCOL"] == "file:git:http:https:ssh"
    assert repository._git("clone", "x") == ["git", "-c", "protocol.ext.allow=never", "clone", "x"]


def test_progress_lines_become_fractions_and_the_rest_is_kept() -> None:
    reports: list[tuple[str, float | None]] = []
    seen: list[str] = []
    for line in [
        "Counting objects:  40% (2/5)",
        "Compressing objects: 100% (3/3), done.",
        "",
        "remote: Enumerating objects: 5, done.",
        "Receiving objects:  50% (1/2)",
        "Resolving deltas:  20% (1/5)",
        "warning: redirecting to https://e.org/y.git/",
    ]:
        GitRepoLoader._progress(line, seen, lambda phase, fraction: reports.append((phase, fraction)))
    assert reports == [
        ("counting objects", pytest.approx(0.02)),
        ("compressing objects", pytest.approx(0.1)),
        ("receiving objects", pytest.approx(0.475)),
        ("resolving objects", pytest.approx(0.87)),
    ]
    assert seen == ["remote: Enumerating objects: 5, done.", "warning: redirecting to https://e.org/y.git/"]
    quiet: list[str] = []
    GitRepoLoader._progress("Receiving objects:  50% (1/2)", quiet, None)  # nobody listens: dropped
    GitRepoLoader._progress("fatal: boom", quiet, None)
    assert quiet == ["fatal: boom"]


def test_a_real_clone_reports_its_phases_in_order_and_takes_one_commit_of_one_branch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "docs/a.md": "a"})
    repo.commit({"docs/b.md": "b"})
    git("tag", "v1", cwd=repo.work)
    git("push", "-q", "origin", "v1", cwd=repo.work)
    repo.branch_off("v2", {"docs/v2.md": "two"})
    reports: list[tuple[str, float]] = []
    loader = loader_for(repo.url)
    with caplog.at_level("DEBUG", logger="agentloom.packs.docs.content"):
        fetched = loader.fetch(tmp_path / "clone", lambda phase, fraction: reports.append((phase, fraction)))  # type: ignore[arg-type]
    command = [
        "git",
        "-c",
        "protocol.ext.allow=never",
        "clone",
        "--depth",
        "1",
        "--single-branch",
        "--no-tags",
        "--progress",
        "--",
        repo.url,
        str(tmp_path / "clone"),
    ]
    assert [r.getMessage() for r in caplog.records if r.levelname == "DEBUG"] == [f"running {command}"]

    assert fetched.folder == tmp_path / "clone" and fetched.files == ["README.md", "docs/a.md", "docs/b.md"]
    assert fetched.commit == git("rev-parse", "main", cwd=repo.bare).strip()
    assert fetched.commit_time == COMMIT_TIME and fetched.warning is None
    assert reports[0] == ("connecting", 0.0) and reports[-1] == ("selecting files", 0.96)
    phases = {
        "counting objects": (0.0, 0.05),
        "compressing objects": (0.05, 0.1),
        "receiving objects": (0.1, 0.85),
        "resolving objects": (0.85, 0.95),
    }
    middle = reports[1:-1]
    assert middle and {p for p, _ in middle} <= set(phases)
    assert [f for _, f in middle] == sorted(f for _, f in middle)
    for phase, fraction in middle:
        assert phases[phase][0] <= fraction <= phases[phase][1] + 1e-9
    assert max(f for p, f in middle if p == "receiving objects") == pytest.approx(0.85)  # 100% ends its range
    clone = str(tmp_path / "clone")
    assert git("-C", clone, "rev-list", "--count", "HEAD", cwd=tmp_path).strip() == "1"  # --depth 1
    assert git("-C", clone, "for-each-ref", "--format=%(refname)", cwd=tmp_path).split() == [
        "refs/heads/main",
        "refs/remotes/origin/HEAD",
        "refs/remotes/origin/main",
    ]  # one branch, no tags
    assert loader.branches() == ["main", "v2"]
    repo.branch_off("feature/refs/heads/x", {"docs/f.md": "f"})  # names may contain what the listing is split on
    git("tag", "old/refs/heads/tagged", cwd=repo.work)  # a tag is no branch, whatever its name
    git("push", "-q", "origin", "old/refs/heads/tagged", cwd=repo.work)
    assert loader.branches() == ["feature/refs/heads/x", "main", "v2"]

    on_branch = loader_for(repo.url, branch="v2").fetch(tmp_path / "v2")
    assert on_branch.files == ["README.md", "docs/a.md", "docs/b.md", "docs/v2.md"]
    assert loader._run(["git", "rev-parse", "--show-toplevel"], cwd=tmp_path / "v2") == (0, f"{tmp_path / 'v2'}\n", "")


def test_fetch_warnings_name_the_source(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"src/main.py": "x", "docs/readme.md": Link("/etc/passwd")})
    fetched = loader_for(repo.url).fetch(tmp_path / "clone")
    assert fetched.files == []
    assert fetched.warning == (
        f"no documentation files found in {repo.url}; configure `paths:` for this source in .knowledge/config.yaml "
        f"to say which files to take\n{repo.url}: skipped symbolic links (never followed): docs/readme.md -> "
        "/etc/passwd"
    )
    with pytest.raises(SourceError) as err:
        loader_for(repo.url, paths=("manual",)).fetch(tmp_path / "clone2")
    assert (
        str(err.value)
        == f"{repo.url}: not in the repository: manual. It has: docs/, src/; fix `paths:` in .knowledge/config.yaml"
    )
    with pytest.raises(SourceError) as err:
        loader_for(repo.url)._head(tmp_path)
    # git's words after "not a git repository" depend on whether tmp_path is on a file system of its own (/dev/shm)
    assert str(err.value).startswith(
        f"{repo.url}: the clone has no commit to read (fatal: not a git repository (or any "
    )
    assert str(err.value).endswith("); check the repository and `branch:`")
    full = Repo(tmp_path / "full", {"README.md": "one"})
    full.commit({"README.md": "two"})  # a work tree with its whole history: the newest commit is read
    assert loader_for(full.url)._head(full.work) == (git("rev-parse", "HEAD", cwd=full.work).strip(), COMMIT_TIME)
    with pytest.raises(SourceError) as err:
        loader_for("https://e.org/x.git")._head(tmp_path / "nowhere")
    assert str(err.value).startswith("https://e.org/x.git: the clone has no commit to read (fatal: cannot change to ")


def test_branches_of_a_repository_that_cannot_be_listed_are_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert loader_for((tmp_path / "nothing.git").as_uri()).branches() is None
    assert loader_for(empty_repo(tmp_path / "empty")).branches() == []
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert loader_for((tmp_path / "nothing.git").as_uri()).branches() is None


def test_a_missing_default_branch_when_the_branches_cannot_be_listed(tmp_path: Path) -> None:
    url = (tmp_path / "gone.git").as_uri()
    assert loader_for(url)._nothing_to_check_out() == (
        f"{url}: the repository's default branch (its HEAD) does not exist, so there is nothing to check out. "
        "Branches: (could not list them: run `git ls-remote --heads` on this URL); set `branch:` for this source in "
        ".knowledge/config.yaml"
    )
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    repo.branch_off("v2", {"docs/v2.md": "two"})
    assert loader_for(repo.url)._nothing_to_check_out() == (
        f"{repo.url}: the repository's default branch (its HEAD) does not exist, so there is nothing to check out. "
        "Branches: main, v2; set `branch:` for this source in .knowledge/config.yaml"
    )
    empty = empty_repo(tmp_path / "empty")
    assert loader_for(empty)._nothing_to_check_out() == (
        f"{empty}: the repository is empty (it has no commits on any branch), so there is nothing to fetch; push a "
        "commit to it, or check the URL in .knowledge/config.yaml"
    )


AUTH = (
    "authentication failed. Check your git credentials (credential helper, SSH key or access token) by running "
    "`git ls-remote` on this URL yourself, then retry"
)
UNREACHABLE = "the host cannot be reached. Check your internet connection (and proxy), then retry"
NO_REPO = f"no repository at this URL. Check the URL in .knowledge/config.yaml ({ACCEPTED_URLS})"


@pytest.mark.parametrize(
    ("stderr", "message"),
    [
        (
            "Cloning into 'x'...\nfatal: unable to access 'https://e.org/x.git/': server certificate verification "
            "failed. "
            "CAfile: none CRLfile: none",
            "TLS certificate verification failed (unable to access 'https://e.org/x.git/': server certificate "
            "verification "
            "failed. CAfile: none CRLfile: none). The server's certificate is not trusted on this machine: if the host "
            "is "
            "yours or your company's (a self-hosted server, a proxy that inspects TLS), install its CA certificate "
            "into the "
            "system store or point git to it with `git config --global http.sslCAInfo /path/to/ca.pem`; otherwise "
            "check "
            "the URL. Certificate checks are never switched off",
        ),
        (
            "fatal: unable to access 'x': gnutls_handshake() failed: An unexpected TLS packet was received.\nmore",
            "the TLS connection failed (unable to access 'x': gnutls_handshake() failed: An unexpected TLS packet was "
            "received.); check that the URL's host and port serve HTTPS and your proxy settings, then retry",
        ),
        (
            "Host key verification failed.\nfatal: Could not read from remote repository.",
            "the SSH host key of this server is not known yet. Connect once yourself (`ssh -T` to the host) to check "
            "and "
            "accept it, then retry",
        ),
        ("fatal: Authentication failed for 'https://e.org/x.git/'", AUTH),
        ("fatal: could not read Username for 'https://e.org': No such device or address", AUTH),
        ("fatal: could not read Password for 'https://me@e.org': No such device", AUTH),
        ("fatal: could not read something: Terminal prompts disabled", AUTH),
        ("git@e.org: Permission denied (publickey).", AUTH),
        ("remote: Access denied to this project", AUTH),
        ("error: The requested URL returned error: 401", AUTH),
        ("error: The requested URL returned error: 403", AUTH),
        ("fatal: unable to access 'x': Could not resolve host: e.org", UNREACHABLE),
        ("fatal: unable to access 'x': Connection refused", UNREACHABLE),
        ("fatal: unable to access 'x': Failed to connect to e.org port 443", UNREACHABLE),
        ("ssh: connect to host e.org port 22: Operation timed out", UNREACHABLE),
        ("ssh: connect to host e.org port 22: Network is unreachable", UNREACHABLE),
        ("ssh: connect to host e.org port 22: No route to host", UNREACHABLE),
        ("fatal: unable to access 'x': Connection reset by peer", UNREACHABLE),
        (
            "fatal: transport 'ext' not allowed",
            f"git refused this transport (allowed: GIT_ALLOW_PROTOCOL=file:git:http:https:ssh); use {ACCEPTED_URLS}, "
            "or "
            "widen GIT_ALLOW_PROTOCOL in your environment",
        ),
        ("fatal: 'x' does not appear to be a git repository", NO_REPO),
        ("remote: Repository not found.", NO_REPO),
        ("fatal: remote error: the branch is Not Found", NO_REPO),
        ("error: The requested URL returned error: 404", NO_REPO),
        ("fatal: '/srv/x.git' Does Not Exist", NO_REPO),
        (
            "warning: could not find remote branch v9 to clone.",  # no branch configured
            "git clone failed: warning: could not find remote branch v9 to clone.",
        ),
        ("fatal: the transport broke\nfatal: early EOF", "git clone failed: fatal: early EOF"),
        ("fatal: something odd\n  happened here  \n", "git clone failed:   happened here"),
        ("", "git clone failed: no message"),
        (" \n ", "git clone failed: no message"),
    ],
)
def test_each_git_failure_gets_its_own_message(stderr: str, message: str) -> None:
    assert loader_for("https://e.org/x.git")._explain(stderr) == f"https://e.org/x.git: {message}"


@pytest.mark.parametrize(
    "stderr",
    [
        "warning: Could not find remote branch v9 to clone.\nfatal: other",
        "fatal: Remote branch v9 not found in upstream origin",
    ],
)
def test_a_missing_configured_branch_lists_the_branches(tmp_path: Path, stderr: str) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    repo.branch_off("v2", {"docs/v2.md": "two"})
    assert loader_for(repo.url, branch="v9")._explain(stderr) == (
        f"{repo.url}: branch 'v9' does not exist. Branches: main, v2; fix `branch:` in .knowledge/config.yaml"
    )
    gone = (tmp_path / "gone.git").as_uri()
    assert loader_for(gone, branch="v9")._explain(stderr) == (
        f"{gone}: branch 'v9' does not exist. Branches: (could not list them); fix `branch:` in .knowledge/config.yaml"
    )
    empty = empty_repo(tmp_path / "empty")
    assert loader_for(empty, branch="v9")._explain(stderr) == (
        f"{empty}: the repository is empty (it has no commits on any branch), so there is nothing to fetch; push a "
        "commit to it, or check the URL in .knowledge/config.yaml"
    )
    # "remote branch" without "not found" is no missing branch
    assert loader_for(repo.url, branch="v9")._explain("fatal: remote branch v9 is weird") == (
        f"{repo.url}: git clone failed: fatal: remote branch v9 is weird"
    )


def test_a_refused_url_never_reaches_git_and_says_why(tmp_path: Path) -> None:
    loader = GitRepoLoader(GitRepoSource.model_construct(type="git_repo", url="", branch=None, paths=None))
    with pytest.raises(SourceError) as err:
        loader.clone(tmp_path / "x")
    assert str(err.value) == f"invalid repository URL: is empty; give a repository URL such as {ACCEPTED_URLS}"


def test_a_copy_that_fails_midway_leaves_no_temporary_file(tmp_path: Path) -> None:
    source, dest_root = tmp_path / "repo", tmp_path / "dest"
    source.mkdir()
    dest_root.mkdir()
    (source / "big.bin").write_bytes(b"x" * (3 * 1024 * 1024))
    before = open_fds()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    with Folder(source, "the repository", "fix-r") as repo, Folder(dest_root, "the docset folder", "fix-d") as dest:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, limits[1]))  # writes past 1 MiB fail (EFBIG)
        try:
            with pytest.raises(OSError) as err:
                dest.stage("big.bin", repo, 0.0)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        assert err.value.errno == errno.EFBIG
    assert list(dest_root.iterdir()) == []
    assert open_fds() == before


def test_a_failed_clone_is_logged_with_gits_own_words(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = (tmp_path / "nothing.git").as_uri()
    reports: list[tuple[str, float | None]] = []
    with caplog.at_level("WARNING", logger="agentloom.packs.docs.content"), pytest.raises(SourceError) as err:
        loader_for(url).clone(tmp_path / "clone", lambda phase, fraction: reports.append((phase, fraction)))
    assert str(err.value) == f"{url}: {NO_REPO}"
    assert reports == [("connecting", 0.0)]
    [record] = caplog.records
    message = record.getMessage()
    assert message.startswith(f"git failed for {url} (exit 128):\nCloning into '{tmp_path / 'clone'}'...\n")
    assert "does not appear to be a git repository" in message and not (tmp_path / "clone").exists()


def test_a_git_that_cannot_be_started_is_named_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(SourceError) as err:
        loader_for((tmp_path / "x.git").as_uri()).clone(tmp_path / "clone")
    assert str(err.value) == (
        "git is not installed (no `git` on PATH); web sources are fetched with the system git. Install it "
        "(Debian/Ubuntu: `sudo apt-get install git`, Fedora: `sudo dnf install git`, macOS: `xcode-select --install`), "
        "check that `git --version` works in this shell, then retry"
    )
    broken = tmp_path / "broken-bin"
    broken.mkdir()
    (broken / "git").write_text("#!/bin/sh\nexit 0\n")
    (broken / "git").chmod(0o644)  # there, but not executable
    monkeypatch.setenv("PATH", str(broken))
    with pytest.raises(SourceError) as err:
        loader_for((tmp_path / "x.git").as_uri()).clone(tmp_path / "clone")
    assert str(err.value) == "git cannot be run (Permission denied); check that `git --version` works, then retry"
    assert not (tmp_path / "clone").exists()


def test_git_output_is_read_whole_and_bytes_that_are_not_utf8_are_replaced(tmp_path: Path) -> None:
    big = "".join(f"line {i:06d} of a long page\n" for i in range(12_000)).encode()  # several pipe reads
    repo = Repo(tmp_path / "repo", {"big.txt": big, "latin1.txt": b"caf\xe9\n"})
    loader = loader_for(repo.url)
    code, out, err = loader._run(["git", "-C", str(repo.work), "show", "HEAD:big.txt"])
    assert (code, out, err) == (0, big.decode(), "")
    code, out, err = loader._run(["git", "-C", str(repo.work), "show", "HEAD:latin1.txt"])
    assert (code, out) == (0, "caf\ufffd\n")
    code, out, err = loader._run(["git", "-C", str(repo.work), "show", "HEAD:caf\udce9.txt"])  # b"caf\xe9.txt"
    assert code == 128 and out == "" and "caf\ufffd.txt" in err


# -- git as a process: its input, its output in pieces, and stopping it --------------------


def stand_in_git(folder: Path, script: str) -> None:
    """A `git` on PATH that runs ``script`` (sh); the real git stays reachable as $REAL_GIT."""
    folder.mkdir(exist_ok=True)
    fake = folder / "git"
    fake.write_text(f"#!/bin/sh\nREAL_GIT={shutil.which('git')}\n{script}\n")
    fake.chmod(0o755)


def test_git_never_reads_the_servers_stdin(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"a protocol message for the server\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)  # the server's stdin, as an MCP client writes to it
    try:
        result = loader_for()._run(["git", "hash-object", "--stdin"], cwd=tmp_path)
        left = os.read(read_end, 1000)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert result == (0, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\n", "")  # git read nothing: the empty blob
    assert left == b"a protocol message for the server\n"


def test_git_messages_split_across_reads_or_without_a_last_newline_are_kept_whole() -> None:
    script = (
        "import sys, time\n"
        "sys.stderr.buffer.write(b'fatal: the first par'); sys.stderr.flush(); time.sleep(0.5)\n"
        "sys.stderr.buffer.write(b't of a line\\nthe last line, caf\\xe9, without a newline'); sys.stderr.flush()\n"
    )
    assert loader_for()._run([sys.executable, "-c", script]) == (
        0,
        "",
        "fatal: the first part of a line\nthe last line, caf\ufffd, without a newline",
    )


def test_a_git_that_closes_its_output_but_lives_on_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "os.close(1); os.close(2)\ntime.sleep(0.6)\nos._exit(0)\n"
    )
    with pytest.raises(SourceError) as err:
        loader_for(timeout=0.3)._run([sys.executable, "-c", script])
    assert str(err.value) == (
        "https://e.org/x.git: git took longer than 0.3 s and was stopped; check your internet "
        "connection and retry, or raise AGENTIC_KNOWLEDGE_GIT_TIMEOUT (seconds)"
    )
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # killed and reaped


def test_an_error_while_git_runs_stops_git(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, sys, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stderr.write('Receiving objects:  50% (1/2)\\n'); sys.stderr.flush()\ntime.sleep(20)\n"
    )

    def report(phase: str, fraction: float | None) -> None:
        raise RuntimeError("the client went away")

    with pytest.raises(RuntimeError, match="^the client went away$"):
        loader_for()._run([sys.executable, "-c", script], report)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # killed and reaped, not left running


def test_listing_branches_never_passes_the_url_to_git_as_an_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    monkeypatch.chdir(repo.work)  # a repository with an origin that git would list instead
    pwned = tmp_path / "pwned"
    url = f"--upload-pack=touch {pwned}"
    loader = GitRepoLoader(GitRepoSource.model_construct(type="git_repo", url=url, branch=None, paths=None))
    assert loader.branches() is None
    assert not pwned.exists()


def test_a_clone_whose_remote_head_names_no_branch_lists_the_branches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "x"})
    repo.branch_off("v2", {"docs/v2.md": "two"})
    # what other git versions print (exit 0, nothing checked out) for a HEAD naming a missing branch
    stand_in_git(
        tmp_path / "bin",
        'case " $* " in *" clone "*)\n'
        '  echo "warning: remote HEAD refers to nonexistent ref, unable to checkout." >&2; exit 0;;\nesac\n'
        'exec "$REAL_GIT" "$@"',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SourceError) as err:
        loader_for(repo.url).clone(tmp_path / "clone")
    assert str(err.value) == (
        f"{repo.url}: the repository's default branch (its HEAD) does not exist, so there is nothing to check out. "
        "Branches: main, v2; set `branch:` for this source in .knowledge/config.yaml"
    )


@pytest.mark.parametrize("code", [0, 1])
def test_a_git_log_that_prints_nothing_is_no_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    stand_in_git(tmp_path / "bin", f"exit {code}")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(SourceError) as err:
        loader_for()._head(tmp_path)
    assert str(err.value) == (
        "https://e.org/x.git: the clone has no commit to read (no commit); check the repository and `branch:`"
    )


def test_a_folder_opened_as_descriptor_zero_is_closed_too(tmp_path: Path) -> None:
    saved = os.dup(0)
    os.close(0)  # a server started with stdin closed: the next descriptor is 0
    try:
        folder = Folder(tmp_path, "the repository", "fix")
        assert folder.fd == 0
        folder.close()
        assert folder.fd == -1
        with pytest.raises(OSError) as err:
            os.fstat(0)
        assert err.value.errno == errno.EBADF
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def test_a_file_that_cannot_be_opened_is_kept_and_the_reason_named(tmp_path: Path) -> None:
    root = tmp_path / "docset"
    root.mkdir()
    (root / "a.md").write_text("x")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with Folder(root, "the docset folder", "Fix.") as dest:
        first, second = os.dup(dest.fd), os.dup(dest.fd)  # the two lowest free descriptors
        os.close(second)
        os.close(first)
        resource.setrlimit(resource.RLIMIT_NOFILE, (second, hard))  # room for the walk's one, not for the file
        try:
            reason = dest.remove("a.md", hashlib.sha256(b"x").hexdigest())
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert reason == "it cannot be read (Too many open files)"
    assert (root / "a.md").read_text() == "x"


# -- safefs: a folder changed by another process between two steps -------------------------


class ChangedBefore:
    """Runs ``change`` once, just before this thread's next call of the C function ``func``:
    what another process could do at that moment, made certain."""

    def __init__(self, func: object, change: object) -> None:
        self.func, self.change, self.done = func, change, False

    def _hook(self, frame: object, event: str, arg: object) -> None:
        if event == "c_call" and arg is self.func and not self.done:
            self.done = True
            self.change()  # type: ignore[operator]

    def __enter__(self) -> Self:
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        assert self.done


def test_a_link_swapped_in_while_folders_are_made_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "repo"
    (source / "deep" / "er").mkdir(parents=True)
    (source / "sub").mkdir()
    (source / "sub" / "x.md").write_text("x")
    (source / "deep" / "er" / "x.md").write_text("x")
    dest_root, outside = tmp_path / "dest", tmp_path / "outside"
    dest_root.mkdir()
    outside.mkdir()
    with Folder(source, "the repository", "fix-r") as repo, Folder(dest_root, "the docset folder", "Fix.") as dest:
        for name, top in (("sub/x.md", "sub"), ("deep/er/x.md", "deep")):
            with ChangedBefore(os.mkdir, lambda top=top: (dest_root / top).symlink_to(outside)):  # type: ignore[misc]
                with pytest.raises(UnsafePath) as err:
                    dest.stage(name, repo, 0.0)
            assert (
                str(err.value)
                == f"{top} in the docset folder is a symbolic link (to {outside}); links are never followed. Fix."
            )
    assert list(outside.iterdir()) == []


def test_a_link_that_vanishes_while_it_is_refused_is_still_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (root / "dlink").symlink_to(tmp_path / "outside")
    (root / "link.md").symlink_to(tmp_path / "outside")
    with Folder(root, "the repository", "Fix.") as repo:
        with ChangedBefore(os.lstat, (root / "dlink").unlink), pytest.raises(UnsafePath) as err:
            repo.open_file("dlink/secret.md")
        assert str(err.value) == "dlink in the repository is a file where a folder is needed; Fix."
        with ChangedBefore(os.readlink, (root / "link.md").unlink), pytest.raises(UnsafePath) as err:
            repo.open_file("link.md")
        assert str(err.value) == "link.md in the repository is a symbolic link (to ?); links are never followed. Fix."


def test_at_a_mount_point_the_error_is_gits_fatal_line_not_its_explanation() -> None:
    """git stops looking for a repository at a file system's boundary and says so on a second line, after the
    "fatal:" one: the message keeps the line that says what is wrong."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder:  # a tmpfs of its own on Linux
        with pytest.raises(SourceError) as err:
            loader_for("https://e.org/x.git")._head(Path(folder))
    message = str(err.value)
    assert message.startswith(
        "https://e.org/x.git: the clone has no commit to read (fatal: not a git repository (or any "
        "parent up to mount point "
    ), message
    assert message.endswith("); check the repository and `branch:`") and "Stopping at" not in message, message
