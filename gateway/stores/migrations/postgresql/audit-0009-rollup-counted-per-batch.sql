-- The rollup is counted by the writer, per batch of rows (gateway.pipeline.rollupwrites): one
-- upsert per bucket and tool of a batch instead of seven per row. The trigger and its function go;
-- the rows already counted stay as they are.
DROP TRIGGER IF EXISTS audit_rollup_kept ON audit;
DROP FUNCTION IF EXISTS audit_rollup_keep();
