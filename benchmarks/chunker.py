"""Chunker A/B (issue 11): the simple chunker (one encode, cuts at token boundaries) against the
strict one (re-encodes chunks cut inside a word and splits them again, one token a character for
CJK without a tokenizer), on SciFact retrieval, on Chinese text, and on speed.

Both are loaded from git history (`git show REV:src/agentloom/packs/vectors/chunking.py`), so
the comparison stays the same whichever of them chunking.py holds; the one it holds now is
marked. SciFact is searched exactly (numpy cosine, a document scores its best chunk) with the
default local model, so the two differ by their chunks alone (no HNSW, no pack search path).
"""

from __future__ import annotations

import base64
import gettext
import math
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.report import ROOT, percentile, write_section
from benchmarks.vectors import SCIFACT, load, ndcg_at_10, recall_at_100

CHUNKING = "src/agentloom/packs/vectors/chunking.py"
CANDIDATES = {"simple": "41a19d9c", "strict": "f89aca98"}
MEGABYTE = 1_000_000  # of UTF-8, where a CJK character takes 3 bytes
SKILLS = SCIFACT.parent / "skills" / "skills"


def load_chunker(name: str, rev: str):  # type: ignore[no-untyped-def]
    """The chunk_text function of chunking.py at `rev`, as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{CHUNKING}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    # our own code from our own history, run as it was committed
    module = types.ModuleType(f"_chunking_{name}")
    sys.modules[module.__name__] = module  # dataclasses look their module up while building Chunk
    exec(compile(source, f"{rev}:{CHUNKING}", "exec"), module.__dict__)
    module.SOURCE = source
    return module


def is_current(module) -> bool:  # type: ignore[no-untyped-def]
    return bool((ROOT / CHUNKING).read_text() == module.SOURCE)


# -- corpora -----------------------------------------------------------------------------------


def _cjk_share(text: str) -> float:
    return sum("\u4e00" <= ch <= "\u9fff" for ch in text) / max(1, len(text))


def chinese_prose() -> list[tuple[str, str]]:
    """Chinese prose found on the machine without the internet: the vim tutor (simplified and
    traditional), GnuPG's help, CPython's CJK codec samples, the Chinese SKILL.md files."""
    stdlib = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings"
    paths = [
        *sorted(Path("/usr/share/vim").glob("vim*/tutor/tutor.zh_*.utf-8")),
        *sorted(Path("/usr/share/gnupg").glob("help.zh_*.txt")),
        *(stdlib / f"{c}-utf8.txt" for c in ("gb2312", "gbk", "gb18030", "big5")),
        *sorted(SKILLS.glob("*/SKILL.md")),
    ]
    docs = []
    for path in paths:
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            if _cjk_share(text) > 0.05:
                docs.append((str(path), text))
    return docs


def chinese_catalogs() -> list[tuple[str, str]]:
    """The Chinese translations of the installed gettext catalogs, one document each (many
    short lines with format strings, options and English names among the characters)."""
    docs = []
    for path in sorted(Path("/usr/share/locale").glob("zh_*/LC_MESSAGES/*.mo")):
        try:
            with path.open("rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        lines = [m for m in catalog.values() if isinstance(m, str) and _cjk_share(m) > 0.1]
        if lines:
            docs.append((str(path), "\n".join(lines)))
    return docs


def unbroken_strings() -> list[tuple[str, str]]:
    """Text without spaces for many tokens, where a cut must fall inside a word: base64 and long
    URLs (seeded, so every run has the same)."""
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_/"
    urls = " ".join("https://example.org/" + "".join(rng.choice(alphabet) for _ in range(300)) for _ in range(60))
    return [("base64", base64.b64encode(rng.randbytes(30_000)).decode()), ("urls", urls)]


def megabyte_of(texts: list[str]) -> str:
    out, size, i = [], 0, 0
    while size < MEGABYTE:
        text = texts[i % len(texts)]
        out.append(text)
        size += len(text.encode()) + 2
        i += 1
    return "\n\n".join(out)


# -- measuring chunks --------------------------------------------------------------------------


@dataclass
class Stats:
    docs: int
    chunks: int
    over: int  # chunks longer than the model reads once encoded alone: their tail is never embedded
    tokens: list[int]  # per chunk, encoded alone, special tokens included
    characters: int  # characters of the corpus the model reads (not spaces, not dropped ones)
    lost: int  # of those, in no embedded part of any chunk
    duplicated: int  # of those, embedded in two or more chunks (the overlap)

    def row(self) -> str:
        p = self.characters / 100
        return (
            f"{self.chunks} | {self.over} | {percentile(self.tokens, 50)} / {percentile(self.tokens, 95)} / "
            f"{max(self.tokens)} | {self.lost} ({self.lost / p:.3f}%) | {self.duplicated / p:.1f}%"
        )


def chunk_corpus(chunker, docs: list[tuple[str, str]], tokenizer, settings) -> list[list]:  # type: ignore[no-untyped-def]
    return [
        chunker.chunk_text(
            text, tokenizer=tokenizer, chunk_tokens=settings[0], overlap_tokens=settings[1], max_tokens=settings[2]
        )
        for _, text in docs
    ]


def measure(docs: list[tuple[str, str]], chunked: list[list], tokenizer, max_tokens: int) -> Stats:  # type: ignore[no-untyped-def]
    """Re-encode every chunk alone, as the embedder will, and see which characters it embeds."""
    flat = [c for chunks in chunked for c in chunks]
    encodings = tokenizer.encode_batch([c.text for c in flat], add_special_tokens=False)
    room = max_tokens - 2  # [CLS] and [SEP]
    tokens, over, k = [], 0, 0
    lost = duplicated = characters = 0
    for (_, text), chunks in zip(docs, chunked):
        depth = np.zeros(len(text) + 1, dtype=np.int32)
        for c in chunks:
            enc = encodings[k]
            k += 1
            tokens.append(len(enc.ids) + 2)
            end = c.end
            if len(enc.ids) > room:
                over += 1
                end = c.start + enc.offsets[room - 1][1]  # the truncated encoding stops here
            depth[c.start] += 1
            depth[end] -= 1
        depth = np.cumsum(depth)[:-1]
        counted = np.isin(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32), _kept(text, tokenizer))
        characters += int(counted.sum())
        lost += int((counted & (depth == 0)).sum())
        duplicated += int((counted & (depth > 1)).sum())
    return Stats(len(docs), len(flat), over, tokens, characters, lost, duplicated)


_KEPT: dict[str, bool] = {}


def _kept(text: str, tokenizer) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Code points of `text` that are text to the model: not whitespace, and not dropped by the
    tokenizer (zero-width and control characters are in no encoding, so they cannot be lost)."""
    for ch in set(text) - _KEPT.keys():
        _KEPT[ch] = not ch.isspace() and bool(tokenizer.encode(ch, add_special_tokens=False).ids)
    return np.array([ord(ch) for ch in set(text) if _KEPT[ch]], dtype=np.uint32)


def seconds(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up: imports, tokenizer caches
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


# -- retrieval ---------------------------------------------------------------------------------


def rank_documents(query_vectors: np.ndarray, chunk_vectors: np.ndarray, owners: list[str]) -> list[list[str]]:
    """Top 100 documents per query by the best cosine of their chunks (vectors are normalised;
    a document's chunks are consecutive)."""
    starts = [i for i in range(len(owners)) if i == 0 or owners[i] != owners[i - 1]]
    doc_ids = [owners[i] for i in starts]
    best = np.maximum.reduceat(query_vectors @ chunk_vectors.T, starts, axis=1)
    top = np.argpartition(-best, 100, axis=1)[:, :100]
    ordered = np.take_along_axis(top, np.argsort(-np.take_along_axis(best, top, axis=1), axis=1), axis=1)
    return [[doc_ids[j] for j in row] for row in ordered]


def retrieval(service, corpus, queries, qrels, chunked: dict[str, list[list]]):  # type: ignore[no-untyped-def]
    """Per-query nDCG@10 and Recall@100 of each chunker (a chunk text both make is embedded
    once), and the embedding rate in chunks per second."""
    texts = sorted({c.text for per_doc in chunked.values() for chunks in per_doc for c in chunks})
    print(f"embedding {len(texts)} distinct chunks", file=sys.stderr)
    step = max(1, len(texts) // 10)

    def progress(done: int, total: int) -> None:
        if done % step < service.settings.embeddings.batch_size or done == total:
            print(f"  {done}/{total}", file=sys.stderr)

    start = time.perf_counter()
    vectors = service.embed_documents(texts, progress=progress)
    rate = len(texts) / (time.perf_counter() - start)
    row = {t: i for i, t in enumerate(texts)}
    query_vectors = np.stack([service.embed_query(q) for q in queries.values()])
    out = {}
    for name, per_doc in chunked.items():
        rows = [row[c.text] for chunks in per_doc for c in chunks]
        owners = [doc_id for (doc_id, _), chunks in zip(corpus, per_doc) for _ in chunks]
        ranked = rank_documents(query_vectors, vectors[rows], owners)
        out[name] = (
            [ndcg_at_10(r, qrels[q]) for r, q in zip(ranked, queries)],
            [recall_at_100(r, qrels[q]) for r, q in zip(ranked, queries)],
        )
    return out, rate


def estimates(chunker, docs: list[tuple[str, str]], tokenizer, chunk_tokens: int, overlap: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Without a tokenizer (API models): real tokens per estimated token, and the median real size
    of a chunk asked to be `chunk_tokens`; the local model's tokenizer stands in for the API's."""
    chunks = [
        c
        for _, text in docs
        for c in chunker.chunk_text(
            text, tokenizer=None, chunk_tokens=chunk_tokens, overlap_tokens=overlap, max_tokens=8192
        )
    ]
    real = [len(e.ids) for e in tokenizer.encode_batch([c.text for c in chunks], add_special_tokens=False)]
    return sum(real) / sum(c.tokens for c in chunks), statistics.median(real)


def run() -> dict:  # type: ignore[type-arg]
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.vectors.settings import VectorSettings

    chunkers = {name: load_chunker(name, rev) for name, rev in CANDIDATES.items()}
    current = next((n for n, m in chunkers.items() if is_current(m)), None)
    defaults = VectorSettings()
    corpus, queries, qrels = load()
    chinese = {"prose": chinese_prose(), "message catalogs": chinese_catalogs()}
    with tempfile.TemporaryDirectory() as data:
        service = EmbeddingService(Settings(data_dir=Path(data), embeddings={"query_cache_size": 0}), BreakerRegistry())
        service.prepare()
        tokenizer, max_tokens = service.tokenizer(), service.max_tokens()
        size, overlap = min(defaults.chunk_size, max_tokens - 2), defaults.chunk_overlap
        params = (size, overlap, max_tokens)

        chunked, scifact, corpus_seconds = {}, {}, {}
        for name, chunker in chunkers.items():
            start = time.perf_counter()
            chunked[name] = chunk_corpus(chunker, corpus, tokenizer, params)
            corpus_seconds[name] = time.perf_counter() - start
            scifact[name] = measure(corpus, chunked[name], tokenizer, max_tokens)
        cjk = {
            (kind, name): measure(docs, chunk_corpus(chunker, docs, tokenizer, params), tokenizer, max_tokens)
            for kind, docs in chinese.items()
            for name, chunker in chunkers.items()
        }
        # the largest chunk_size this model allows and no overlap: no headroom for a chunk that
        # re-encodes longer, and no next chunk repeating the tail the model cuts off
        worst = (max_tokens - 2, 0, max_tokens)
        stress = {
            name: measure(
                unbroken_strings(), chunk_corpus(chunker, unbroken_strings(), tokenizer, worst), tokenizer, max_tokens
            )
            for name, chunker in chunkers.items()
        }
        english_mb = megabyte_of([text for _, text in corpus])
        chinese_mb = megabyte_of([text for _, text in chinese["prose"]])
        speed = {
            name: [
                seconds(
                    lambda t=text, c=chunker: c.chunk_text(
                        t, tokenizer=tokenizer, chunk_tokens=size, overlap_tokens=overlap, max_tokens=max_tokens
                    )
                )
                for text in (english_mb, chinese_mb)
            ]
            for name, chunker in chunkers.items()
        }
        estimate = {
            name: [estimates(chunker, docs, tokenizer, size, overlap) for docs in (corpus[:1000], chinese["prose"])]
            for name, chunker in chunkers.items()
        }
        quality, embed_rate = retrieval(service, corpus, queries, qrels, chunked)
    made = [{c.text for chunks in per_doc for c in chunks} for per_doc in chunked.values()]
    identical = len(set.intersection(*made)) / len(set.union(*made))
    return {
        "current": current,
        "chinese": {k: (len(d), sum(len(t) for _, t in d)) for k, d in chinese.items()},
        "scifact": scifact,
        "stress": stress,
        "corpus_seconds": corpus_seconds,
        "cjk": cjk,
        "speed": speed,
        "sizes": (len(english_mb), len(chinese_mb)),
        "estimate": estimate,
        "quality": quality,
        "params": params,
        "identical": identical,
        "embed_rate": embed_rate,
        "documents": len(corpus),
        "queries": len(queries),
    }


def paired(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean of b - a over the queries and its standard error."""
    diff = [y - x for x, y in zip(a, b)]
    return statistics.fmean(diff), statistics.stdev(diff) / math.sqrt(len(diff))


def better(r: dict) -> tuple[str, str]:  # type: ignore[type-arg]
    """The better chunker by the figures, and why. In order: retrieval beyond two standard
    errors; then fewer chunks the model truncates (default settings and the stress case); then
    speed (chunking is a small part of ingest next to embedding, so it decides only a tie)."""
    a, b = CANDIDATES
    d, se = paired(r["quality"][a][0], r["quality"][b][0])
    if abs(d) > 2 * se:
        return (b if d > 0 else a), "its nDCG@10 is higher by more than two standard errors"
    over = {
        n: r["scifact"][n].over + sum(r["cjk"][k, n].over for k in r["chinese"]) + r["stress"][n].over for n in (a, b)
    }
    if over[a] != over[b]:
        return min(over, key=over.__getitem__), "retrieval is level and it leaves fewer chunks over the model's limit"
    time_ = {n: r["corpus_seconds"][n] + sum(r["speed"][n]) for n in (a, b)}
    return min(time_, key=time_.__getitem__), "retrieval and limits are level, and it is faster"


def reading(r: dict) -> str:  # type: ignore[type-arg]
    """The trade-off in numbers, whichever way it falls."""
    d, se = paired(r["quality"]["simple"][0], r["quality"]["strict"][0])
    sim, st = r["scifact"]["simple"], r["scifact"]["strict"]
    (_, _), (zr_sim, zm_sim) = r["estimate"]["simple"]
    (_, _), (zr_st, zm_st) = r["estimate"]["strict"]
    embed = sim.chunks / r["embed_rate"]  # seconds to embed the corpus's chunks
    share = {n: r["corpus_seconds"][n] / (r["corpus_seconds"][n] + embed) for n in CANDIDATES}
    return (
        f"Reading. On SciFact the two make {r['identical']:.0%} identical chunks and their nDCG@10 differs by "
        f"{d:+.4f} (standard error {se:.4f}): level. At the default settings neither leaves a chunk over the "
        f"limit (the largest is {max(sim.tokens)} / {max(st.tokens)} tokens: chunk_size {r['params'][0]} leaves "
        f"{r['params'][2] - 2 - r['params'][0]} tokens of headroom for a chunk cut inside a word that re-encodes "
        "longer). "
        f"Without that headroom simple leaves {r['stress']['simple'].over} chunks over the limit and loses "
        f"{r['stress']['simple'].lost} characters of unbroken text; strict {r['stress']['strict'].over} and "
        f"{r['stress']['strict'].lost}. Without a tokenizer simple counts four CJK characters as one token, so a "
        f"Chinese chunk asked to be {r['params'][0]} tokens holds {zm_sim:.0f} ({zr_sim:.1f}x)"
        f"{', more than a 512-token API model reads' if zm_sim > 510 else ''}; strict's holds {zm_st:.0f} "
        f"({zr_st:.1f}x). Strict costs time on many short "
        f"documents ({r['corpus_seconds']['strict']:.1f} s against {r['corpus_seconds']['simple']:.1f} s for SciFact), "
        f"but chunking is {share['strict']:.1%} (strict) or {share['simple']:.1%} (simple) of ingest once the chunks "
        f"are embedded ({r['embed_rate']:.1f} chunks/s here)."
    )


def report(r: dict) -> str:  # type: ignore[type-arg]
    names = list(CANDIDATES)
    size, overlap, max_tokens = r["params"]
    label = {n: f"{n} ({CANDIDATES[n]}){', in chunking.py' if n == r['current'] else ''}" for n in names}
    columns = "chunks | over the limit | tokens p50 / p95 / max | characters lost | duplicated |"
    out = [
        (
            f"Two chunkers from the history, loaded with `git show REV:{CHUNKING}`: **simple** (one encode, cuts "
            "between its tokens) and **strict** (re-encodes each chunk cut inside a word and splits it again if it "
            "grew; without a tokenizer, one token a CJK character). Default settings: chunk_size "
            f"{size}, overlap {overlap}, all-MiniLM-L6-v2's tokenizer, limit {max_tokens} tokens with [CLS] and [SEP]. "
            "Every chunk is re-encoded alone, as the embedder sees it: *over the limit* counts chunks the model "
            "truncates, *tokens* include [CLS] and [SEP], *characters lost* counts characters (not spaces) then in no "
            "embedded chunk, *duplicated* the share embedded twice or more (the overlap).\n"
        ),
        (
            f"### SciFact\n\n{r['documents']} abstracts (title + text), one call per abstract; {r['queries']} test "
            "queries, exact cosine search over all chunks (numpy), a document scored by its best chunk.\n"
        ),
        f"| chunker | nDCG@10 | Recall@100 | {columns}",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        ndcg, recall = r["quality"][n]
        out.append(
            f"| {label[n]} | {statistics.fmean(ndcg):.4f} | {statistics.fmean(recall):.3f} | {r['scifact'][n].row()} |"
        )
    out.append("\n### Chinese\n")
    for kind, (docs, chars) in r["chinese"].items():
        out.append(f"- {kind}: {docs} documents, {chars} characters")
    out.append(
        "\nProse: the vim tutor in simplified and traditional Chinese, GnuPG's help, CPython's CJK codec "
        "samples, the Chinese SKILL.md files. Catalogs: the zh_* gettext translations installed, one "
        "document each (short lines, format strings, English names).\n"
    )
    out += [f"| text | chunker | {columns}", "|---|---|---|---|---|---|---|"]
    for (kind, n), stats in r["cjk"].items():
        out.append(f"| {kind} | {label[n]} | {stats.row()} |")
    out.append(
        f"\nStress: base64 and long URLs (no space for hundreds of tokens) at chunk_size {max_tokens - 2}, "
        "the largest this model allows, and overlap 0:\n"
    )
    out += [f"| chunker | {columns}", "|---|---|---|---|---|---|"]
    for n in names:
        out.append(f"| {label[n]} | {r['stress'][n].row()} |")
    en, zh = r["sizes"]
    out += [
        "\n### Speed\n",
        f"| chunker | SciFact, {r['documents']} calls (s) | 1 MB English, {en} characters (s) | 1 MB Chinese, {zh} "
        "characters (s) |",
        "|---|---|---|---|",
    ]
    for n in names:
        out.append(f"| {label[n]} | {r['corpus_seconds'][n]:.2f} | {r['speed'][n][0]:.2f} | {r['speed'][n][1]:.2f} |")
    out += [
        "\nMedian of 3 after a warm-up (SciFact: one pass); 1 MB of UTF-8, SciFact abstracts or the Chinese prose "
        "repeated.\n",
        (
            f"Without a tokenizer (API models), chunks asked to be {size} tokens, measured in all-MiniLM-L6-v2 "
            "tokens (standing in for an API's tokenizer):\n"
        ),
        "| chunker | English: real per estimated token | English: chunk median | Chinese: real per estimated token | "
        "Chinese: chunk median |",
        "|---|---|---|---|---|",
    ]
    for n in names:
        (er, em), (zr, zm) = r["estimate"][n]
        out.append(f"| {label[n]} | {er:.2f} | {em:.0f} | {zr:.2f} | {zm:.0f} |")
    winner, reason = better(r)
    out.append("\n" + reading(r))
    out.append(f"\n**Better by these figures: {winner}**: {reason}. chunking.py holds {r['current'] or 'neither'}.")
    return "\n".join(out)


def main() -> None:
    body = report(run())
    print(body)
    write_section("Chunker: simple vs strict", body, "python -m benchmarks chunker")


if __name__ == "__main__":
    main()
