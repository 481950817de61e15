-- The audit trail: one row per tool call.
CREATE TABLE IF NOT EXISTS audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time TEXT NOT NULL,
    epoch DOUBLE PRECISION NOT NULL,
    session TEXT NOT NULL,
    caller TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    outcome TEXT NOT NULL,
    duration_ms DOUBLE PRECISION NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_session ON audit (session, id);
CREATE INDEX IF NOT EXISTS audit_by_tool ON audit (tool, id);
