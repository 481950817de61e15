-- Calls counted as their rows are written, so that the dashboard reads thousands of rows rather
-- than millions: per tool, per minute, per 10 minutes and per hour (`span` seconds, `start` the
-- span's first second), by outcome (ok, tool error, refused, timeout, upstream down: the classes of
-- gateway.pipeline.rollup) and the ok ones that found nothing (a Find_Tools search whose row's
-- detail says 'no match'), with the summed duration of the calls that ran (not refused, server
-- not down) and how many of those fell into each duration bucket (b0 under 1 ms ... b29 at 60 s or
-- more; the bounds are gateway.pipeline.rollup.BOUNDS_MS). An upstream's sampling and elicitation
-- requests, audited under the tool that caused them, are no calls and not counted.
-- A trigger keeps it: it fires for the rows actually inserted, so a row shipped from a spool and
-- replayed again is counted once. The audit rows stay as they are.
CREATE TABLE IF NOT EXISTS audit_rollup (
    span INTEGER NOT NULL,
    start INTEGER NOT NULL,
    tool TEXT NOT NULL,
    ok INTEGER NOT NULL DEFAULT 0, tool_error INTEGER NOT NULL DEFAULT 0, refused INTEGER NOT NULL DEFAULT 0,
    timeout INTEGER NOT NULL DEFAULT 0, down INTEGER NOT NULL DEFAULT 0, no_match INTEGER NOT NULL DEFAULT 0,
    total_ms DOUBLE PRECISION NOT NULL,
    b0 INTEGER NOT NULL DEFAULT 0, b1 INTEGER NOT NULL DEFAULT 0, b2 INTEGER NOT NULL DEFAULT 0, b3 INTEGER NOT NULL DEFAULT 0,
    b4 INTEGER NOT NULL DEFAULT 0, b5 INTEGER NOT NULL DEFAULT 0, b6 INTEGER NOT NULL DEFAULT 0, b7 INTEGER NOT NULL DEFAULT 0,
    b8 INTEGER NOT NULL DEFAULT 0, b9 INTEGER NOT NULL DEFAULT 0, b10 INTEGER NOT NULL DEFAULT 0, b11 INTEGER NOT NULL DEFAULT 0,
    b12 INTEGER NOT NULL DEFAULT 0, b13 INTEGER NOT NULL DEFAULT 0, b14 INTEGER NOT NULL DEFAULT 0, b15 INTEGER NOT NULL DEFAULT 0,
    b16 INTEGER NOT NULL DEFAULT 0, b17 INTEGER NOT NULL DEFAULT 0, b18 INTEGER NOT NULL DEFAULT 0, b19 INTEGER NOT NULL DEFAULT 0,
    b20 INTEGER NOT NULL DEFAULT 0, b21 INTEGER NOT NULL DEFAULT 0, b22 INTEGER NOT NULL DEFAULT 0, b23 INTEGER NOT NULL DEFAULT 0,
    b24 INTEGER NOT NULL DEFAULT 0, b25 INTEGER NOT NULL DEFAULT 0, b26 INTEGER NOT NULL DEFAULT 0, b27 INTEGER NOT NULL DEFAULT 0,
    b28 INTEGER NOT NULL DEFAULT 0, b29 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (span, start, tool)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS audit_rollup_kept AFTER INSERT ON audit
WHEN NEW.outcome NOT IN ('sampling', 'elicitation')
BEGIN
    INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
    SELECT spans.span, CAST(NEW.epoch / spans.span AS INTEGER) * spans.span, NEW.tool,
        (NEW.outcome = 'ok'),
        (NEW.outcome NOT IN ('ok', 'timeout', 'unavailable') AND NEW.outcome NOT LIKE 'refused:%'),
        (NEW.outcome LIKE 'refused:%'),
        (NEW.outcome = 'timeout'),
        (NEW.outcome = 'unavailable'),
        (NEW.outcome = 'ok' AND NEW.detail = 'no match'),
        CASE WHEN one.ran THEN one.d ELSE 0 END,
        (one.ran AND one.d < 1),
        (one.ran AND one.d >= 1 AND one.d < 1.5),
        (one.ran AND one.d >= 1.5 AND one.d < 2),
        (one.ran AND one.d >= 2 AND one.d < 3),
        (one.ran AND one.d >= 3 AND one.d < 5),
        (one.ran AND one.d >= 5 AND one.d < 7.5),
        (one.ran AND one.d >= 7.5 AND one.d < 10),
        (one.ran AND one.d >= 10 AND one.d < 15),
        (one.ran AND one.d >= 15 AND one.d < 20),
        (one.ran AND one.d >= 20 AND one.d < 30),
        (one.ran AND one.d >= 30 AND one.d < 50),
        (one.ran AND one.d >= 50 AND one.d < 75),
        (one.ran AND one.d >= 75 AND one.d < 100),
        (one.ran AND one.d >= 100 AND one.d < 150),
        (one.ran AND one.d >= 150 AND one.d < 200),
        (one.ran AND one.d >= 200 AND one.d < 300),
        (one.ran AND one.d >= 300 AND one.d < 500),
        (one.ran AND one.d >= 500 AND one.d < 750),
        (one.ran AND one.d >= 750 AND one.d < 1000),
        (one.ran AND one.d >= 1000 AND one.d < 1500),
        (one.ran AND one.d >= 1500 AND one.d < 2000),
        (one.ran AND one.d >= 2000 AND one.d < 3000),
        (one.ran AND one.d >= 3000 AND one.d < 5000),
        (one.ran AND one.d >= 5000 AND one.d < 7500),
        (one.ran AND one.d >= 7500 AND one.d < 10000),
        (one.ran AND one.d >= 10000 AND one.d < 15000),
        (one.ran AND one.d >= 15000 AND one.d < 20000),
        (one.ran AND one.d >= 20000 AND one.d < 30000),
        (one.ran AND one.d >= 30000 AND one.d < 60000),
        (one.ran AND one.d >= 60000)
    FROM (SELECT NEW.duration_ms AS d, NEW.outcome NOT LIKE 'refused:%' AND NEW.outcome <> 'unavailable' AS ran) AS one,
        (SELECT 60 AS span UNION ALL SELECT 600 UNION ALL SELECT 3600) AS spans WHERE 1
    ON CONFLICT (span, start, tool) DO UPDATE SET
        ok = ok + excluded.ok, tool_error = tool_error + excluded.tool_error, refused = refused + excluded.refused, timeout = timeout + excluded.timeout,
        down = down + excluded.down, no_match = no_match + excluded.no_match, total_ms = total_ms + excluded.total_ms, b0 = b0 + excluded.b0,
        b1 = b1 + excluded.b1, b2 = b2 + excluded.b2, b3 = b3 + excluded.b3, b4 = b4 + excluded.b4,
        b5 = b5 + excluded.b5, b6 = b6 + excluded.b6, b7 = b7 + excluded.b7, b8 = b8 + excluded.b8,
        b9 = b9 + excluded.b9, b10 = b10 + excluded.b10, b11 = b11 + excluded.b11, b12 = b12 + excluded.b12,
        b13 = b13 + excluded.b13, b14 = b14 + excluded.b14, b15 = b15 + excluded.b15, b16 = b16 + excluded.b16,
        b17 = b17 + excluded.b17, b18 = b18 + excluded.b18, b19 = b19 + excluded.b19, b20 = b20 + excluded.b20,
        b21 = b21 + excluded.b21, b22 = b22 + excluded.b22, b23 = b23 + excluded.b23, b24 = b24 + excluded.b24,
        b25 = b25 + excluded.b25, b26 = b26 + excluded.b26, b27 = b27 + excluded.b27, b28 = b28 + excluded.b28,
        b29 = b29 + excluded.b29;
END;
-- The rows written before this version, counted once.
INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
SELECT spans.span, CAST(epoch / spans.span AS INTEGER) * spans.span AS bucket, tool,
    SUM(outcome = 'ok'),
    SUM(outcome NOT IN ('ok', 'timeout', 'unavailable') AND outcome NOT LIKE 'refused:%'),
    SUM(outcome LIKE 'refused:%'),
    SUM(outcome = 'timeout'),
    SUM(outcome = 'unavailable'),
    SUM(outcome = 'ok' AND detail = 'no match'),
    SUM(CASE WHEN outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' THEN duration_ms ELSE 0 END),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms < 1),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1 AND duration_ms < 1.5),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1.5 AND duration_ms < 2),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 2 AND duration_ms < 3),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 3 AND duration_ms < 5),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 5 AND duration_ms < 7.5),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 7.5 AND duration_ms < 10),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 10 AND duration_ms < 15),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 15 AND duration_ms < 20),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 20 AND duration_ms < 30),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 30 AND duration_ms < 50),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 50 AND duration_ms < 75),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 75 AND duration_ms < 100),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 100 AND duration_ms < 150),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 150 AND duration_ms < 200),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 200 AND duration_ms < 300),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 300 AND duration_ms < 500),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 500 AND duration_ms < 750),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 750 AND duration_ms < 1000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1000 AND duration_ms < 1500),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1500 AND duration_ms < 2000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 2000 AND duration_ms < 3000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 3000 AND duration_ms < 5000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 5000 AND duration_ms < 7500),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 7500 AND duration_ms < 10000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 10000 AND duration_ms < 15000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 15000 AND duration_ms < 20000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 20000 AND duration_ms < 30000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 30000 AND duration_ms < 60000),
    SUM(outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 60000)
FROM audit CROSS JOIN (SELECT 60 AS span UNION ALL SELECT 600 UNION ALL SELECT 3600) AS spans
WHERE outcome NOT IN ('sampling', 'elicitation')
GROUP BY spans.span, bucket, tool;
-- What happened to each server: its connection's states, restarts, configuration changes.
CREATE TABLE IF NOT EXISTS server_events (
    id INTEGER PRIMARY KEY,
    epoch DOUBLE PRECISION NOT NULL,
    server TEXT NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS server_events_by_time ON server_events (epoch);
CREATE INDEX IF NOT EXISTS server_events_by_server ON server_events (server, epoch);
