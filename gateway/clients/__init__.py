"""The client side: each client session's context, what an upstream may ask of its client, and the client's tasks."""
