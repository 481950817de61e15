-- Each row's unique id (rows written before it have none), so that a row inserted twice, shipped
-- from a spool and replayed from it again after a kill, is stored once (INSERT ... ON CONFLICT DO NOTHING).
ALTER TABLE audit ADD COLUMN row_id TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS audit_by_row_id ON audit (row_id);
