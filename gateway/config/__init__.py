"""The configuration: reading a file safely, its schema, checked values and building the frozen dataclasses."""
