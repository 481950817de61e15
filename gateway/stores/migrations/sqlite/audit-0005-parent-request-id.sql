-- A tool call made by a script (code mode) names the request id of the script's Run_Code; other rows get ''.
ALTER TABLE audit ADD COLUMN parent_request_id TEXT NOT NULL DEFAULT '';
