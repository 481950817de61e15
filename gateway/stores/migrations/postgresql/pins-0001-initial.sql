-- Each tool's definition as first trusted (or last accepted), by server and the server's own tool name.
CREATE TABLE IF NOT EXISTS tool_pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    definition TEXT NOT NULL,
    pinned DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (server, tool)
);
-- Definitions that differ from their pin, and what became of them.
CREATE TABLE IF NOT EXISTS tool_changes (
    id TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    old_fingerprint TEXT NOT NULL,
    old_definition TEXT NOT NULL,
    new_fingerprint TEXT NOT NULL,
    new_definition TEXT NOT NULL,
    status TEXT NOT NULL,
    detected DOUBLE PRECISION NOT NULL,
    decided_by TEXT,
    decided DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS tool_changes_by_server ON tool_changes (server, status);
