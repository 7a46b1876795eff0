"""Reading .knowledge/config.yaml: discovery, validation, versions, aliases and paths (REQ-3 to REQ-5, REQ-11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloom.core.errors import ConfigError
from agentloom.packs.docs.config import DEFAULT_TEMPLATE, load_project
from agentloom.packs.docs.discovery import ConfigWatcher, find_config
from tests.packs.docs.conftest import write_config


def load(root: Path, text: str):  # type: ignore[no-untyped-def]
    return load_project(write_config(root, text))


def test_found_in_a_parent_folder_and_not_anywhere_else(project: Path, tmp_path: Path) -> None:
    path = write_config(project, "docsets: []\n")
    deep = project / "src" / "pkg" / "sub"
    deep.mkdir(parents=True)
    assert find_config(deep) == path
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with pytest.raises(ConfigError, match=r"no \.knowledge/config\.yaml found in .*elsewhere or any folder above"):
        ConfigWatcher(outside).current()


def test_the_nearest_config_wins(project: Path) -> None:
    write_config(project, "docsets: []\n")
    inner = project / "inner"
    nearest = write_config(inner, "docsets: [{name: inner}]\n")
    assert find_config(inner / ".knowledge") == nearest
    assert [d.name for d in ConfigWatcher(inner).current().docsets] == ["inner"]


def test_syntax_error_names_the_line(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"YAML syntax error at line 3, column \d+"):
        load(project, "docsets:\n  - name: react\n\tversion: '18'\n")


def test_unknown_keys_are_ignored(project: Path) -> None:
    config = load(project, "owner: me\ndocsets:\n  - name: react\n    colour: blue\n    version: '18.2'\n")
    assert config.docsets[0].name == "react"


@pytest.mark.parametrize("text", ["{}\n", "docs_root: docs\n", "# only a comment\n", "- a list\n"])
def test_a_missing_docsets_section_is_a_validation_error(project: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="docsets"):
        load(project, text)


def test_no_docsets_is_an_empty_list(project: Path) -> None:
    assert load(project, "docsets: []\n").docsets == ()
    assert load(project, "docsets:\n").docsets == ()


@pytest.mark.parametrize("written,kept", [("18.10", "18.10"), ("'18.10'", "18.10"), ("2", "2"), ("1.0", "1.0"), ("v3", "v3")])
def test_versions_are_kept_exactly_as_written(project: Path, written: str, kept: str) -> None:
    docset = load(project, f"docsets:\n  - name: react\n    version: {written}\n").docsets[0]
    assert docset.version == kept
    assert docset.local_path.endswith(f"/.knowledge/docs/react-{kept}/")


def test_a_version_that_is_not_text_is_refused_with_the_fix(project: Path) -> None:
    with pytest.raises(ConfigError, match=r'docsets\[0\]\.version: must be text; quote it'):
        load(project, "docsets:\n  - name: react\n    version: [1, 2]\n")


def test_local_path_defaults_to_docs_root_name_version(project: Path) -> None:
    config = load(project, "docsets:\n  - name: react\n    version: '18.2'\n")
    assert config.docsets[0].local_path == f"{project.as_posix()}/.knowledge/docs/react-18.2/"
    assert config.docsets[0].as_dict()["local_path"] == config.docsets[0].local_path


def test_relative_docs_root_resolves_against_the_project_root(project: Path) -> None:
    nested = project / "a" / "b"
    nested.mkdir(parents=True)
    config = load_project(write_config(project, "docs_root: ./manuals/\ndocsets:\n  - name: vue\n    version: '3'\n"))
    assert config.docsets[0].local_path == f"{project.as_posix()}/manuals/vue-3/"
    assert ConfigWatcher(nested).current().docsets[0].local_path == f"{project.as_posix()}/manuals/vue-3/"


def test_absolute_docs_root_stays(project: Path, tmp_path: Path) -> None:
    config = load(project, f"docs_root: {(tmp_path / 'shared').as_posix()}\ndocsets:\n  - name: vue\n    version: '3'\n")
    assert config.docsets[0].local_path == f"{(tmp_path / 'shared').as_posix()}/vue-3/"


def test_backslashes_become_forward_slashes(project: Path) -> None:
    config = load(project, "docs_root: 'manuals\\docs'\ndocsets:\n  - name: vue\n    version: '3'\n")
    assert "\\" not in config.docsets[0].local_path
    assert config.docsets[0].local_path == f"{project.as_posix()}/manuals/docs/vue-3/"


def test_web_only_docsets_live_under_knowledge_docsets(project: Path) -> None:
    config = load(
        project,
        "docsets:\n  - name: fastapi\n    version: '0.110'\n    web_sources:\n"
        "      - type: git_repo\n        url: https://example.org/fastapi.git\n",
    )
    assert config.docsets[0].local_path == f"{project.as_posix()}/.knowledge/docsets/fastapi/"


def test_configured_local_path_wins_over_web_sources(project: Path) -> None:
    config = load(
        project,
        "docsets:\n  - name: fastapi\n    local_path: vendor-docs/fastapi\n    web_sources:\n"
        "      - type: git_repo\n        url: https://example.org/fastapi.git\n",
    )
    assert config.docsets[0].local_path == f"{project.as_posix()}/vendor-docs/fastapi/"


def test_docsets_may_be_a_mapping_and_id_is_a_name(project: Path) -> None:
    config = load(project, "docsets:\n  react:\n    version: '18'\n  vue: {}\n")
    assert [d.name for d in config.docsets] == ["react", "vue"]
    config = load(project, "docsets:\n  - id: react-docs\n    name: React Documentation\n")
    assert config.docsets[0].name == "react-docs"
    assert config.docsets[0].description == "React Documentation"


def test_aliases_resolve_and_must_be_unique(project: Path) -> None:
    config = load(project, "docsets:\n  - name: react\n    aliases: [reactjs, r]\n  - name: vue\n    aliases: vuejs\n")
    assert config.get("reactjs") is config.get("react")
    assert config.get("vuejs").name == "vue"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="'react' is already used by docset 'react'"):
        load(project, "docsets:\n  - name: react\n  - name: vue\n    aliases: [react]\n")


@pytest.mark.parametrize("name", ["../etc", "a/b", "a\\b", "..", "", "has space", "a..b"])
def test_invalid_docset_names_are_refused(project: Path, name: str) -> None:
    with pytest.raises(ConfigError, match=r"docsets\[0\]\.name"):
        load(project, f"docsets:\n  - name: {name!r}\n")


def test_sources_are_validated(project: Path) -> None:
    base = "docsets:\n  - name: d\n    web_sources:\n"
    with pytest.raises(ConfigError, match=r"web_sources\[0\]\.type: unknown source type 'svn'; supported: git_repo"):
        load(project, base + "      - type: svn\n        url: https://example.org/x\n")
    with pytest.raises(ConfigError, match=r"web_sources\[0\]\.url: is required"):
        load(project, base + "      - type: git_repo\n")
    for url in ["--upload-pack=touch /tmp/x", "ext::sh -c touch% /tmp/x", "not a url", "https:///path", "file://relative"]:
        with pytest.raises(ConfigError, match=r"web_sources\[0\]\.url"):
            load(project, base + f"      - type: git_repo\n        url: {url!r}\n")
    with pytest.raises(ConfigError, match=r"paths: .*must be a path inside the repository"):
        load(project, base + "      - type: git_repo\n        url: https://example.org/x.git\n        paths: ['../x']\n")


def test_branch_and_paths_may_sit_under_options(project: Path) -> None:
    config = load(
        project,
        "docsets:\n  - name: d\n    web_sources:\n      - type: git_repo\n        url: git@github.com:o/r.git\n"
        "        options:\n          branch: dev\n          paths: [docs/, README.md]\n",
    )
    source = config.docsets[0].web_sources[0]
    assert (source.branch, source.paths) == ("dev", ("docs", "README.md"))


def test_templates_default_global_and_per_docset(project: Path) -> None:
    config = load(project, "template: 'G {keywords}'\ndocsets:\n  - name: a\n  - name: b\n    template: 'B {keywords}'\n")
    assert [d.template for d in config.docsets] == ["G {keywords}", "B {keywords}"]
    assert load(project, "docsets:\n  - name: a\n").docsets[0].template == DEFAULT_TEMPLATE
