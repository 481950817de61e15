"""The front doors: the MCP server shared by HTTP and stdio, the HTTP app and the stdio loop."""
