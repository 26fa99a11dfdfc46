"""The judging core: model clients, output parsing, judges, agents. Knows nothing of MCP."""
