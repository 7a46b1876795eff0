"""The docs pack's content loader against hostile repositories, metadata and folders.

Everything here is real: git repositories made in the test and served over file://, a
loopback HTTPS server with a certificate made in the test, a loopback server that never
answers. Nothing needs the internet.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import pytest

from agentloom.packs.docs.config import GitRepoSource, load_project
from agentloom.packs.docs.content import GitRepoLoader, SourceError, load_docset, state
from tests.conftest import PYTHON
from tests.packs.docs.conftest import write_config
from tests.packs.docs.repos import Link, Repo, empty_repo

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


def test_metadata_cannot_make_init_delete_files_outside_the_docset(tmp_path: Path) -> None:
    victim, absolute = tmp_path / "victim.txt", tmp_path / "also-victim.txt"
    victim.write_text("precious")
    absolute.write_text("precious too")
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    project = tmp_path / "p"
    write_config(project, f"docsets:\n  - name: lib\n    web_sources:\n      - type: git_repo\n        url: {repo.url}\n")
    docset = project / ".knowledge" / "docsets" / "lib"
    # As a cloned repository could bring it: an entry for the configured source and one for a source no
    # longer configured (both paths of deletion), each naming files far outside the docset folder.
    write_metadata(docset, [
        {"url": repo.url, "files": ["README.md", "../../../../victim.txt", str(absolute)]},
        {"url": (tmp_path / "gone.git").as_uri(), "files": ["../../../../victim.txt", str(absolute)]},
    ])

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
    assert any("refused the entry 'docs/victim.md'" in w and "leads outside the docset folder" in w for w in result.warnings)


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
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "docs/passwd.md": Link("/etc/passwd"),
                                    "docs/secret.md": Link(str(secret / "secret.md"))})
    for wanted in ("docs/passwd.md", "docs/secret.md"):
        project, docset = web_docset(tmp_path / "p", repo.url, source_extra=f"        paths: [{wanted}]\n")
        result = load_docset(project, docset).sources[0]
        assert not result.ok and f"{wanted} is a symbolic link in the repository" in result.error  # type: ignore[operator]
        assert "links are never followed" in result.error  # type: ignore[operator]
    assert "SECRET" not in docs_text(docset.path) and "root:" not in docs_text(docset.path)


def test_a_linked_folder_does_not_bring_another_folders_files(tmp_path: Path, secret: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "manual": Link(str(secret)), "guide/intro.md": "# intro",
                                    "guide/extra": Link(str(secret)), "docs/readme.md": Link(str(secret / "secret.md"))})
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
    assert not result.ok and f"docs in the docset folder {docset.path} is a symbolic link (to {elsewhere})" in result.error  # type: ignore[operator]


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


def test_web_sources_write_only_inside_the_project_unless_the_docset_allows_it(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib"})
    elsewhere = tmp_path / "elsewhere"
    project, docset = web_docset(tmp_path / "p", repo.url, extra=f"    local_path: {elsewhere}\n")
    result = load_docset(project, docset)
    assert not elsewhere.exists()
    assert not result.ok and "is outside the project folder" in result.sources[0].error  # type: ignore[operator]
    assert "allow_outside_project: true" in result.sources[0].error  # type: ignore[operator]

    project, docset = web_docset(tmp_path / "p", repo.url, extra=f"    local_path: {elsewhere}\n    allow_outside_project: true\n")
    assert load_docset(project, docset).ok and (elsewhere / "README.md").read_text() == "# lib"

    write_config(tmp_path / "p", f"docsets:\n  - name: local\n    local_path: {tmp_path / 'anywhere'}\n")
    local = cli(tmp_path / "p", "init", "local")  # a local-only docset may still point anywhere
    assert local.returncode == 0 and (tmp_path / "anywhere").is_dir()


@pytest.mark.parametrize("local_path", [".", ".knowledge", ".git", ".git/hooks", "..", "../p-sibling"])
def test_web_sources_never_write_into_the_project_root_git_or_knowledge_folder(tmp_path: Path, local_path: str) -> None:
    repo = Repo(tmp_path / "repo", {"README.md": "# lib", "config": "[core]\n\tfsmonitor = touch /tmp/x\n"},)
    root = tmp_path / "p"
    (root / ".git").mkdir(parents=True)
    project, docset = web_docset(root, repo.url, extra=f"    local_path: {local_path}\n",
                                 source_extra="        paths: [README.md, config]\n")
    result = load_docset(project, docset)
    assert not result.ok and not (root / "README.md").exists() and not (root / ".git" / "config").exists()
    assert not (root / ".knowledge" / "README.md").exists() and not (tmp_path / "README.md").exists()
    assert not (tmp_path / "p-sibling").exists()


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
def test_a_timeout_kills_git_and_its_helpers(tmp_path: Path) -> None:
    with SilentServer() as server:
        url = f"http://127.0.0.1:{server.port}/never.git"
        loader = GitRepoLoader(GitRepoSource(type="git_repo", url=url), timeout=1.5)
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"git took longer than 1.5 s"):
            loader.clone(tmp_path / "clone")
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 3
        while processes_mentioning(f"127.0.0.1:{server.port}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_mentioning(f"127.0.0.1:{server.port}") == []  # git-remote-http is gone too


@pytest.mark.timeout(90)
def test_the_timeout_setting_is_read_when_loading(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("AGENTIC_KNOWLEDGE_GIT_TIMEOUT", "1.5")
    with SilentServer() as server:
        project, docset = web_docset(tmp_path / "p", f"http://127.0.0.1:{server.port}/never.git")
        started = time.monotonic()
        error = load_docset(project, docset).sources[0].error
    assert time.monotonic() - started < 20
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
        subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, key


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[str]:
    cert, key = self_signed_certificate(tmp_path)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
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
