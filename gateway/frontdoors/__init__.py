"""The front doors: the MCP server shared by HTTP and stdio, and the HTTP app."""
