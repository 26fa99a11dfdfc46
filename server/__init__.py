"""The MCP face of judge-mcp: tools, transports, settings, auth. Owns no judging logic."""
