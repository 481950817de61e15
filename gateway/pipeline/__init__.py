"""The call pipeline and its steps."""
