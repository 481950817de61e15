"""Process plumbing: the data directory and its owners, logs and request ids, metrics, redaction,
background loops, the heap and the SDK's lazy imports."""
