-- Exposed tool names: the server that owns each (NULL once freed) and the rank of the highest
-- risk seen under it (0 low, 1 medium, 2 high).
CREATE TABLE IF NOT EXISTS tool_names (
    name TEXT PRIMARY KEY,
    owner TEXT,
    risk INTEGER
);
