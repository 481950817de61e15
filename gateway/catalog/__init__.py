"""What is served: the unified tool record, exposed names and their owners, the merged catalog,
and the judgement of each definition (pins, poisoning)."""
