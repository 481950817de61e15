"""What changes while the gateway runs: the live servers, groups and pinned definitions, and hot reload."""
