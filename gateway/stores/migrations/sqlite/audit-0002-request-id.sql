-- Each row names the request its log lines carry; older rows get ''.
ALTER TABLE audit ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
