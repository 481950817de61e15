-- Servers and groups registered through the API, in the config file's form (JSON).
CREATE TABLE IF NOT EXISTS registrations (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
