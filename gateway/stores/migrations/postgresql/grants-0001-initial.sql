-- Each caller's OAuth grant for an upstream server (its tokens, sealed) and when its access token
-- expires (epoch seconds, NULL when the provider gave no lifetime); and each server's OAuth client
-- (registered dynamically or configured), sealed, with the redirect URI it was registered for.
CREATE TABLE IF NOT EXISTS upstream_grants (
    server TEXT NOT NULL,
    caller TEXT NOT NULL,
    tokens TEXT NOT NULL,
    expires_at DOUBLE PRECISION,
    updated DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (server, caller)
);
CREATE TABLE IF NOT EXISTS upstream_clients (
    server TEXT PRIMARY KEY,
    client TEXT NOT NULL
);
