-- Each row names the request its log lines carry; older rows get ''.
ALTER TABLE audit ADD COLUMN IF NOT EXISTS request_id TEXT NOT NULL DEFAULT '';
