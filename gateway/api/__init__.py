"""The admin REST API under `/api/v1`: servers, tools, skills, groups, approvals and sessions, as JSON."""
