"""The MCP host: packs found through entry points, built-in tools, transports."""
