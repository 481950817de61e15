"""The web page served at `/`: catalog, tools with a try-it form, servers, skills, groups, approvals and audit."""
