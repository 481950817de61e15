"""An MCP gateway and tool host: many tool sources behind one namespaced, policed endpoint."""
