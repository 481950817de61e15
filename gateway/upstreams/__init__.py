"""Where tools come from: upstream servers, local functions, per-session workspaces."""
