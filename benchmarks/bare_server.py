"""The baseline for cold start: a bare MCPServer with one tool, nothing else."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def ping(text: str) -> str:
    """Echo."""
    return text


if __name__ == "__main__":
    server.run()
