"""The command line: `mcp-gateway` and `python -m gateway`."""
