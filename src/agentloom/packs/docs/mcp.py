"""``agentic-knowledge-mcp``: the docs pack alone, served over stdio."""

from __future__ import annotations

from importlib.metadata import EntryPoint

INSTRUCTIONS = (
    "Documentation navigation. Call list_docsets to see which documentation sets this project has, "
    "then search_docs with a docset and keywords: it tells you which folder to search with your own "
    "text-search tools."
)


def main(argv: list[str] | None = None) -> None:
    import argparse

    argparse.ArgumentParser(
        prog="agentic-knowledge-mcp",
        description="The docs pack alone as an MCP server over stdio (tools: search_docs, list_docsets). "
        "It reads .knowledge/config.yaml from its working directory upward, then from the client's roots; "
        "AGENTLOOM_DOCS__PROJECT_DIR or AGENTLOOM_DOCS__CONFIG_FILE name the project otherwise. "
        "Start it from an MCP client, not by hand.",
    ).parse_args(argv)  # --help prints this and exits; an unknown argument exits 2 with the reason

    import anyio

    from agentloom.core.logs import configure_logging, stdout_to_stderr
    from agentloom.core.settings import Settings
    from agentloom.server.host import ENTRY_POINT_GROUP, Host
    from agentloom.server.stdio import run_stdio

    settings = Settings(packs=["docs"], disabled_packs=[])  # this command is the docs pack, whatever else is set
    configure_logging(settings.log_level)
    docs = EntryPoint(name="docs", value="agentloom.packs.docs:pack", group=ENTRY_POINT_GROUP)
    with stdout_to_stderr():
        host = Host(settings, [docs], name="agentic-knowledge", instructions=INSTRUCTIONS)
    anyio.run(run_stdio, host.server)


if __name__ == "__main__":
    main()
