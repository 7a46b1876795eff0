"""agentloom: real tools for AI agents over MCP, and the engine that runs their workflows."""

__version__ = "0.1.0"
