"""Shared test parts: a configurable upstream MCP server and a harness around a real gateway."""
