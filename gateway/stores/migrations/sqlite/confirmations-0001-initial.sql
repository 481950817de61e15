-- One-time confirmation tokens, by the hash of the token.
CREATE TABLE IF NOT EXISTS confirmations (
    token_hash TEXT PRIMARY KEY,
    caller TEXT NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    issued REAL NOT NULL,
    expires REAL NOT NULL,
    used REAL
);
CREATE INDEX IF NOT EXISTS confirmations_by_expiry ON confirmations (expires);
