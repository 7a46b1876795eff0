from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from agentloom.core.settings import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("AGENTLOOM_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user-data"))
    s = Settings()
    # Not ./.agentloom: desktop MCP clients start servers in /, and /.agentloom is no place for data.
    assert s.data_dir == tmp_path / "user-data" / "agentloom"
    assert s.data_dir_origin.startswith("the user data directory")
    assert s.packs is None and s.pack_enabled("anything")
    assert (s.breakers.failure_threshold, s.breakers.reset_timeout_seconds) == (3, 300)


def test_environment_with_nested_keys_and_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOM_PACKS", "vectors, docs")
    monkeypatch.setenv("AGENTLOOM_DISABLED_PACKS", "docs")
    monkeypatch.setenv("AGENTLOOM_BREAKERS__FAILURE_THRESHOLD", "5")
    s = Settings()
    assert s.packs == ["vectors", "docs"]
    assert s.pack_enabled("vectors") and not s.pack_enabled("docs") and not s.pack_enabled("skills")
    assert s.breakers.failure_threshold == 5


def test_a_projects_agentloom_folder_is_used_when_it_exists(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user-data"))
    (tmp_path / ".agentloom").mkdir()
    s = Settings()
    assert s.data_dir == tmp_path / ".agentloom"
    assert s.data_dir_origin == "the project's .agentloom, found in the working directory"


def test_the_data_directorys_origin_names_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".agentloom").mkdir()  # a setting wins over the project's folder
    (tmp_path / "agentloom.toml").write_text('data_dir = "from-file"\n')
    assert Settings().data_dir_origin == "set by data_dir in agentloom.toml"
    monkeypatch.setenv("AGENTLOOM_DATA_DIR", "from-env")
    assert (Settings().data_dir, Settings().data_dir_origin) == (Path("from-env"), "set by AGENTLOOM_DATA_DIR")
    s = Settings(data_dir=Path("from-cli"))
    assert (s.data_dir, s.data_dir_origin) == (Path("from-cli"), "set by --data-dir")
    assert s.model_copy(update={"port": 9000}).data_dir_origin == "set by --data-dir"


def test_toml_file_below_environment_and_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "agentloom.toml").write_text(
        'data_dir = "from-file"\nport = 9000\n[pack_settings.vectors]\nchunk_size = 300\n'
    )
    monkeypatch.setenv("AGENTLOOM_PORT", "9100")
    s = Settings(data_dir=Path("from-cli"))
    assert s.data_dir == Path("from-cli") and s.port == 9100
    assert Settings().data_dir == Path("from-file")

    class VectorSettings(BaseModel):
        chunk_size: int = 200
        overlap: int = 20

    monkeypatch.setenv("AGENTLOOM_VECTORS__OVERLAP", "40")
    assert Settings().for_pack("vectors", VectorSettings) == VectorSettings(chunk_size=300, overlap=40)


def test_explicit_config_file_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOM_CONFIG_FILE", "missing.toml")
    with pytest.raises(FileNotFoundError, match="AGENTLOOM_CONFIG_FILE=missing.toml: no such file"):
        Settings()


def test_invalid_values_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOM_BREAKERS__FAILURE_THRESHOLD", "0")
    with pytest.raises(ValidationError, match="breakers.failure_threshold"):
        Settings()
