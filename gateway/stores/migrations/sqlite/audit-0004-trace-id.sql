-- Each row names the trace of its request when the gateway exports traces; other rows get ''.
ALTER TABLE audit ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
