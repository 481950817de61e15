"""Skills: folders, search, per-session disclosure and the meta-tools."""
