"""Serving a session: which source answers a call, resources and prompts as the session may see
them, and what passes from upstreams to clients."""
