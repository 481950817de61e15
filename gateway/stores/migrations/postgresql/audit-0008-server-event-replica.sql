-- Which replica saw each server event (`SharedState.replica`): replicas sharing one database each
-- write their own view of a server, which the dashboard draws as a lane of its own. Events
-- written before this version get '' (one replica's, unnamed).
ALTER TABLE server_events ADD COLUMN IF NOT EXISTS replica TEXT NOT NULL DEFAULT '';
