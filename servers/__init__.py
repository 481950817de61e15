"""MCP servers shipped with the gateway, each runnable on its own as `python -m servers.<name>`."""
