"""Reading .knowledge/config.yaml: discovery, validation, versions, aliases and paths."""

from __future__ import annotations

import locale
from pathlib import Path

import pytest

from agentloom.core.errors import ConfigError
from agentloom.packs.docs.config import DEFAULT_TEMPLATE, load_project
from agentloom.packs.docs.discovery import ConfigWatcher, find_config
from tests.packs.docs.conftest import write_config


def load(root: Path, text: str):
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


@pytest.mark.parametrize(
    "written,kept", [("18.10", "18.10"), ("'18.10'", "18.10"), ("2", "2"), ("1.0", "1.0"), ("v3", "v3")]
)
def test_versions_are_kept_exactly_as_written(project: Path, written: str, kept: str) -> None:
    docset = load(project, f"docsets:\n  - name: react\n    version: {written}\n").docsets[0]
    assert docset.version == kept
    assert docset.local_path.endswith(f"/.knowledge/docs/react-{kept}/")


def test_a_version_that_is_not_text_is_refused_with_the_fix(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"docsets\[0\]\.version: must be text; quote it"):
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
    config = load(
        project, f"docs_root: {(tmp_path / 'shared').as_posix()}\ndocsets:\n  - name: vue\n    version: '3'\n"
    )
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
    assert config.get("vuejs").name == "vue"
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
    for url in [
        "--upload-pack=touch /tmp/x",
        "ext::sh -c touch% /tmp/x",
        "not a url",
        "https:///path",
        "file://relative",
    ]:
        with pytest.raises(ConfigError, match=r"web_sources\[0\]\.url"):
            load(project, base + f"      - type: git_repo\n        url: {url!r}\n")
    with pytest.raises(ConfigError, match=r"paths: .*must be a path inside the repository"):
        load(
            project, base + "      - type: git_repo\n        url: https://example.org/x.git\n        paths: ['../x']\n"
        )


def test_branch_and_paths_may_sit_under_options(project: Path) -> None:
    config = load(
        project,
        "docsets:\n  - name: d\n    web_sources:\n      - type: git_repo\n        url: git@github.com:o/r.git\n"
        "        options:\n          branch: dev\n          paths: [docs/, README.md]\n",
    )
    source = config.docsets[0].web_sources[0]
    assert (source.branch, source.paths) == ("dev", ("docs", "README.md"))


def test_templates_default_global_and_per_docset(project: Path) -> None:
    config = load(
        project, "template: 'G {keywords}'\ndocsets:\n  - name: a\n  - name: b\n    template: 'B {keywords}'\n"
    )
    assert [d.template for d in config.docsets] == ["G {keywords}", "B {keywords}"]
    assert load(project, "docsets:\n  - name: a\n").docsets[0].template == DEFAULT_TEMPLATE


# -- every message word for word, and each derived path ------------------------------------

EXAMPLE = 'docsets:\n  - name: react\n    version: "18.2"\n    aliases: [reactjs]'


def error_of(root: Path, text: str) -> str:
    path = write_config(root, text)
    with pytest.raises(ConfigError) as err:
        load_project(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "docsets: [\n",
            "YAML syntax error at line 2, column 1: did not find expected node content. Fix the file; "
            "the change is picked up on the next call",
        ),
        (
            "a: b: c\n",
            "YAML syntax error at line 1, column 5: mapping values are not allowed in this context. Fix the "
            "file; the change is picked up on the next call",
        ),
        (
            "docsets: *x\n",
            "YAML syntax error at line 1, column 10: found undefined alias. Fix the file; the change is "
            "picked up on the next call",
        ),
        ("- x\n", f"the file must be a mapping with a `docsets:` section, for example\n{EXAMPLE}"),
        ("", f"the file must be a mapping with a `docsets:` section, for example\n{EXAMPLE}"),
        ("x: 1\n", f"the required `docsets:` section is missing; add it, for example\n{EXAMPLE}"),
        ("docsets: 5\n", "invalid configuration:\n  - docsets: Input should be a valid tuple"),
        ("docsets:\n  - {}\n", "invalid configuration:\n  - docsets[0].name: is required"),
        (
            "docsets:\n  a:\n  b: 5\n",
            "invalid configuration:\n  - docsets[1]: Input should be a valid dictionary or instance of DocsetConfig",
        ),
        (
            "docsets:\n  - name: a\n    aliases: ['ok', 'b/c']\n",
            "invalid configuration:\n  - docsets[0].aliases: alias 'b/c' is not a valid docset name: "
            "use 1 to 100 letters, digits, '.', '_' or '-' (no '/', '\\', spaces or '..')",
        ),
        (
            "docsets:\n  - name: ok\n  - name: 'a b'\n    version: [1]\n",
            "invalid configuration:\n  - docsets[1].name: 'a b' is not a valid docset name: "
            "use 1 to 100 letters, digits, '.', '_' or '-' (no '/', '\\', spaces or '..')\n"
            "  - docsets[1].version: must be text; quote it, for example version: \"['1']\"",
        ),  # numbers stay text
        (
            "docsets:\n  - name: a\n  - name: b\n    aliases: [c]\n  - name: c\n",
            "docsets[2] (c): the name 'c' is already used by docset 'b'; names and aliases must be unique",
        ),
        (
            "docsets:\n  - name: a\n    aliases: [b, b]\n",
            "docsets[0] (a): the name 'b' is already used by docset 'a'; names and aliases must be unique",
        ),
    ],
)
def test_configuration_errors_word_for_word(project: Path, text: str, message: str) -> None:
    assert error_of(project, text) == message


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("branch: '-x'", "branch: '-x' is not a branch name"),
        ("branch: 'a b'", "branch: 'a b' is not a branch name"),
        ('branch: "a\\tb"', "branch: 'a\\tb' is not a branch name"),
        ("branch: ''", "branch: '' is not a branch name"),
        ("paths: ['  ']", "paths: '  ' must be a path inside the repository, like docs/ or README.md"),
        ("paths: [docs, '/etc']", "paths: '/etc' must be a path inside the repository, like docs/ or README.md"),
        ("paths: ['\\etc']", "paths: '\\\\etc' must be a path inside the repository, like docs/ or README.md"),
        ("paths: ['a\\..\\b']", "paths: 'a\\\\..\\\\b' must be a path inside the repository, like docs/ or README.md"),
        ("paths: ['docs/../..']", "paths: 'docs/../..' must be a path inside the repository, like docs/ or README.md"),
    ],
)
def test_source_settings_are_refused_word_for_word(project: Path, source: str, message: str) -> None:
    text = (
        "docsets:\n  - name: a\n    web_sources:\n      - type: git_repo\n        url: https://e.org/x.git\n"
        f"        {source}\n"
    )
    assert error_of(project, text) == f"invalid configuration:\n  - docsets[0].web_sources[0].{message}"


def test_source_url_and_type_messages_word_for_word(project: Path) -> None:
    base = "docsets:\n  - name: a\n    web_sources:\n      - type: {}\n        url: {}\n"
    assert error_of(project, base.format("svn", "https://e.org/x")) == (
        "invalid configuration:\n  - docsets[0].web_sources[0].type: unknown source type 'svn'; supported: git_repo"
    )
    assert error_of(project, base.format("git_repo", "'-oops'")) == (
        "invalid configuration:\n  - docsets[0].web_sources[0].url: '-oops' starts with '-' and would be read by git "
        "as an option"
    )


def test_source_paths_are_cleaned_and_an_empty_list_means_all(project: Path) -> None:
    base = "docsets:\n  - name: a\n    web_sources:\n      - type: git_repo\n        url: https://e.org/x.git\n"
    source = (
        load(project, base + "        paths: ['docs\\en', 'x/./y/', README.md]\n        branch: v1.2\n")
        .docsets[0]
        .web_sources[0]
    )
    assert (source.type, source.url, source.branch, source.paths) == (
        "git_repo",
        "https://e.org/x.git",
        "v1.2",
        ("docs/en", "x/y", "README.md"),
    )
    assert load(project, base + "        paths: []\n").docsets[0].web_sources[0].paths is None
    assert load(project, base).docsets[0].web_sources[0].paths is None
    assert load(project, base).docsets[0].web_sources[0].branch is None
    # options fill in, the source's own keys win
    source = (
        load(project, base + "        branch: top\n        options: {branch: inner, paths: [a]}\n")
        .docsets[0]
        .web_sources[0]
    )
    assert (source.branch, source.paths) == ("top", ("a",))


def test_empty_values_fall_back_to_their_defaults(project: Path) -> None:
    config = load(project, "docs_root: ''\ndocsets:\n  - name: a\n    version: ''\n    aliases:\n    web_sources:\n")
    docset = config.docsets[0]
    assert config.docs_root == project / ".knowledge" / "docs"
    assert (docset.version, docset.aliases, docset.web_sources) == (None, (), ())
    assert docset.path == project / ".knowledge" / "docs" / "a"
    assert docset.allow_outside_project is False and docset.description is None
    config = load(project, "docsets:\n  a:\n  b: {version: '2', aliases: bee, allow_outside_project: true}\n")
    assert [(d.name, d.version, d.aliases, d.allow_outside_project) for d in config.docsets] == [
        ("a", None, (), False),
        ("b", "2", ("bee",), True),
    ]
    assert config.get("bee") is config.docsets[1] and config.get("nope") is None


def test_id_with_a_description_keeps_the_description(project: Path) -> None:
    docset = load(project, "docsets:\n  - id: a\n    name: Alpha\n    description: given\n").docsets[0]
    assert (docset.name, docset.description) == ("a", "given")
    docset = load(project, "docsets:\n  - id: a\n").docsets[0]
    assert (docset.name, docset.description) == ("a", None)
    docset = load(project, "docsets:\n  - id: a\n    name: 5\n").docsets[0]
    assert (docset.name, docset.description) == ("a", "5")


def test_paths_under_home_and_with_dots_are_normalised(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = load(
        project,
        "docs_root: '~/d'\ndocsets:\n  - name: a\n  - name: b\n    local_path: '~/x/../y'\n"
        "  - name: c\n    local_path: 'sub/./z/'\n",
    )
    assert config.docs_root == tmp_path / "home" / "d"
    assert [d.path for d in config.docsets] == [
        tmp_path / "home" / "d" / "a",
        tmp_path / "home" / "y",
        project / "sub" / "z",
    ]
    assert config.root == project and config.knowledge_dir == project / ".knowledge"
    assert config.config_path == project / ".knowledge" / "config.yaml"


def test_a_docset_as_reported(project: Path) -> None:
    config = load(
        project,
        "docsets:\n  - name: fastapi\n    version: '0.1'\n    aliases: [fa, fast]\n    description: Web APIs\n"
        "    web_sources:\n      - type: git_repo\n        url: https://e.org/a.git\n"
        "      - type: git_repo\n        url: https://e.org/b.git\n  - name: plain\n",
    )
    assert config.docsets[0].as_dict() == {
        "name": "fastapi",
        "version": "0.1",
        "aliases": ["fa", "fast"],
        "local_path": f"{project.as_posix()}/.knowledge/docsets/fastapi/",
        "description": "Web APIs",
        "web_sources": ["https://e.org/a.git", "https://e.org/b.git"],
    }
    assert config.available() == "fastapi (aliases: fa, fast), plain"
    empty = load(project, "docsets: []\n")
    assert (
        empty.available()
        == f"none are configured; add one under `docsets:` in {project / '.knowledge' / 'config.yaml'}"
    )


def test_an_unreadable_or_undecodable_file_says_what_to_do(project: Path) -> None:
    path = project / ".knowledge" / "config.yaml"
    with pytest.raises(ConfigError) as err:
        load_project(path)
    assert str(err.value) == (
        f"{path}: cannot read the configuration file (No such file or directory); check that it "
        "exists and that this user may read it"
    )
    path.parent.mkdir(parents=True)
    path.write_bytes(b"docsets: []\n# caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        load_project(path)
    assert str(err.value) == f"{path}: not UTF-8 text (invalid continuation byte); save it as UTF-8"
    assert load_project(path, text="docsets: [{name: given}]\n").docsets[0].name == "given"  # text given: not read


def test_a_control_character_is_a_syntax_error_with_its_position(project: Path) -> None:
    path = write_config(project, "docsets: [\x01]\n")
    with pytest.raises(ConfigError) as err:
        load_project(path)
    assert str(err.value) == (
        f"{path}: YAML syntax error: unacceptable character #x0001: control characters are not "
        'allowed\n  in "<unicode string>", position 10'
    )


def test_the_file_is_read_as_utf8_whatever_the_locale(project: Path) -> None:
    path = write_config(project, "docsets:\n  - name: a\n    description: café\n")
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # the locale's encoding is ASCII now
    try:
        assert load_project(path).docsets[0].description == "café"
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)


@pytest.mark.parametrize("written", ["2024-02-28", "2024-02-30", "2024-02-28 10:00:00"])
def test_a_version_like_a_date_is_kept_as_written_not_read_as_a_date(project: Path, written: str) -> None:
    assert load(project, f"docsets:\n  - name: react\n    version: {written}\n").docsets[0].version == written


@pytest.mark.parametrize(
    "text",
    [
        "docsets: !!int x\n",
        "docsets: !!bool maybe\n",
        "docsets: !!timestamp x\n",
        "docsets:\n  - name: react\n    version: !!float 1.x\n",
    ],
)
def test_a_tagged_value_yaml_cannot_convert_is_a_configuration_error(project: Path, text: str) -> None:
    path = write_config(project, text)
    with pytest.raises(ConfigError) as err:
        load_project(path)
    assert str(err.value).startswith(f"{path}: a tagged value cannot be converted (")
    assert str(err.value).endswith("); remove the `!!` tag or quote the value")
