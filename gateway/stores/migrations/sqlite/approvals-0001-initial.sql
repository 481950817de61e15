-- Risky calls parked until a person decides.
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    caller TEXT NOT NULL,
    role TEXT,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    status TEXT NOT NULL,
    decided_by TEXT,
    decided REAL
);
CREATE INDEX IF NOT EXISTS approvals_by_call ON approvals (caller, session, tool, args_digest);
