-- One-time confirmation tokens, by the hash of the token.
CREATE TABLE IF NOT EXISTS confirmations (
    token_hash TEXT PRIMARY KEY,
    caller TEXT NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    issued DOUBLE PRECISION NOT NULL,
    expires DOUBLE PRECISION NOT NULL,
    used DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS confirmations_by_expiry ON confirmations (expires);
