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
-- On PostgreSQL, each writing transaction takes one advisory lock first, so that replicas shipping
-- rows at once update the shared counters one after the other, never in orders that deadlock.
CREATE TABLE IF NOT EXISTS audit_rollup (
    span INTEGER NOT NULL,
    start BIGINT NOT NULL,
    tool TEXT NOT NULL,
    ok BIGINT NOT NULL DEFAULT 0, tool_error BIGINT NOT NULL DEFAULT 0, refused BIGINT NOT NULL DEFAULT 0,
    timeout BIGINT NOT NULL DEFAULT 0, down BIGINT NOT NULL DEFAULT 0, no_match BIGINT NOT NULL DEFAULT 0,
    total_ms DOUBLE PRECISION NOT NULL,
    b0 BIGINT NOT NULL DEFAULT 0, b1 BIGINT NOT NULL DEFAULT 0, b2 BIGINT NOT NULL DEFAULT 0, b3 BIGINT NOT NULL DEFAULT 0,
    b4 BIGINT NOT NULL DEFAULT 0, b5 BIGINT NOT NULL DEFAULT 0, b6 BIGINT NOT NULL DEFAULT 0, b7 BIGINT NOT NULL DEFAULT 0,
    b8 BIGINT NOT NULL DEFAULT 0, b9 BIGINT NOT NULL DEFAULT 0, b10 BIGINT NOT NULL DEFAULT 0, b11 BIGINT NOT NULL DEFAULT 0,
    b12 BIGINT NOT NULL DEFAULT 0, b13 BIGINT NOT NULL DEFAULT 0, b14 BIGINT NOT NULL DEFAULT 0, b15 BIGINT NOT NULL DEFAULT 0,
    b16 BIGINT NOT NULL DEFAULT 0, b17 BIGINT NOT NULL DEFAULT 0, b18 BIGINT NOT NULL DEFAULT 0, b19 BIGINT NOT NULL DEFAULT 0,
    b20 BIGINT NOT NULL DEFAULT 0, b21 BIGINT NOT NULL DEFAULT 0, b22 BIGINT NOT NULL DEFAULT 0, b23 BIGINT NOT NULL DEFAULT 0,
    b24 BIGINT NOT NULL DEFAULT 0, b25 BIGINT NOT NULL DEFAULT 0, b26 BIGINT NOT NULL DEFAULT 0, b27 BIGINT NOT NULL DEFAULT 0,
    b28 BIGINT NOT NULL DEFAULT 0, b29 BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (span, start, tool)
);
CREATE OR REPLACE FUNCTION audit_rollup_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7168372);
    INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
    SELECT spans.span, (floor(NEW.epoch / spans.span) * spans.span)::bigint, NEW.tool,
        (NEW.outcome = 'ok')::int,
        (NEW.outcome NOT IN ('ok', 'timeout', 'unavailable') AND NEW.outcome NOT LIKE 'refused:%')::int,
        (NEW.outcome LIKE 'refused:%')::int,
        (NEW.outcome = 'timeout')::int,
        (NEW.outcome = 'unavailable')::int,
        (NEW.outcome = 'ok' AND NEW.detail = 'no match')::int,
        CASE WHEN one.ran THEN one.d ELSE 0 END,
        (one.ran AND one.d < 1)::int,
        (one.ran AND one.d >= 1 AND one.d < 1.5)::int,
        (one.ran AND one.d >= 1.5 AND one.d < 2)::int,
        (one.ran AND one.d >= 2 AND one.d < 3)::int,
        (one.ran AND one.d >= 3 AND one.d < 5)::int,
        (one.ran AND one.d >= 5 AND one.d < 7.5)::int,
        (one.ran AND one.d >= 7.5 AND one.d < 10)::int,
        (one.ran AND one.d >= 10 AND one.d < 15)::int,
        (one.ran AND one.d >= 15 AND one.d < 20)::int,
        (one.ran AND one.d >= 20 AND one.d < 30)::int,
        (one.ran AND one.d >= 30 AND one.d < 50)::int,
        (one.ran AND one.d >= 50 AND one.d < 75)::int,
        (one.ran AND one.d >= 75 AND one.d < 100)::int,
        (one.ran AND one.d >= 100 AND one.d < 150)::int,
        (one.ran AND one.d >= 150 AND one.d < 200)::int,
        (one.ran AND one.d >= 200 AND one.d < 300)::int,
        (one.ran AND one.d >= 300 AND one.d < 500)::int,
        (one.ran AND one.d >= 500 AND one.d < 750)::int,
        (one.ran AND one.d >= 750 AND one.d < 1000)::int,
        (one.ran AND one.d >= 1000 AND one.d < 1500)::int,
        (one.ran AND one.d >= 1500 AND one.d < 2000)::int,
        (one.ran AND one.d >= 2000 AND one.d < 3000)::int,
        (one.ran AND one.d >= 3000 AND one.d < 5000)::int,
        (one.ran AND one.d >= 5000 AND one.d < 7500)::int,
        (one.ran AND one.d >= 7500 AND one.d < 10000)::int,
        (one.ran AND one.d >= 10000 AND one.d < 15000)::int,
        (one.ran AND one.d >= 15000 AND one.d < 20000)::int,
        (one.ran AND one.d >= 20000 AND one.d < 30000)::int,
        (one.ran AND one.d >= 30000 AND one.d < 60000)::int,
        (one.ran AND one.d >= 60000)::int
    FROM (SELECT NEW.duration_ms AS d, NEW.outcome NOT LIKE 'refused:%' AND NEW.outcome <> 'unavailable' AS ran) AS one,
        (VALUES (60), (600), (3600)) AS spans (span)
    ON CONFLICT (span, start, tool) DO UPDATE SET
        ok = audit_rollup.ok + excluded.ok, tool_error = audit_rollup.tool_error + excluded.tool_error, refused = audit_rollup.refused + excluded.refused, timeout = audit_rollup.timeout + excluded.timeout,
        down = audit_rollup.down + excluded.down, no_match = audit_rollup.no_match + excluded.no_match, total_ms = audit_rollup.total_ms + excluded.total_ms, b0 = audit_rollup.b0 + excluded.b0,
        b1 = audit_rollup.b1 + excluded.b1, b2 = audit_rollup.b2 + excluded.b2, b3 = audit_rollup.b3 + excluded.b3, b4 = audit_rollup.b4 + excluded.b4,
        b5 = audit_rollup.b5 + excluded.b5, b6 = audit_rollup.b6 + excluded.b6, b7 = audit_rollup.b7 + excluded.b7, b8 = audit_rollup.b8 + excluded.b8,
        b9 = audit_rollup.b9 + excluded.b9, b10 = audit_rollup.b10 + excluded.b10, b11 = audit_rollup.b11 + excluded.b11, b12 = audit_rollup.b12 + excluded.b12,
        b13 = audit_rollup.b13 + excluded.b13, b14 = audit_rollup.b14 + excluded.b14, b15 = audit_rollup.b15 + excluded.b15, b16 = audit_rollup.b16 + excluded.b16,
        b17 = audit_rollup.b17 + excluded.b17, b18 = audit_rollup.b18 + excluded.b18, b19 = audit_rollup.b19 + excluded.b19, b20 = audit_rollup.b20 + excluded.b20,
        b21 = audit_rollup.b21 + excluded.b21, b22 = audit_rollup.b22 + excluded.b22, b23 = audit_rollup.b23 + excluded.b23, b24 = audit_rollup.b24 + excluded.b24,
        b25 = audit_rollup.b25 + excluded.b25, b26 = audit_rollup.b26 + excluded.b26, b27 = audit_rollup.b27 + excluded.b27, b28 = audit_rollup.b28 + excluded.b28,
        b29 = audit_rollup.b29 + excluded.b29;
    RETURN NULL;
END
$$;
CREATE TRIGGER audit_rollup_kept AFTER INSERT ON audit FOR EACH ROW
WHEN (NEW.outcome NOT IN ('sampling', 'elicitation')) EXECUTE FUNCTION audit_rollup_keep();
-- The rows written before this version, counted once.
INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
SELECT spans.span, (floor(epoch / spans.span) * spans.span)::bigint AS bucket, tool,
    SUM((outcome = 'ok')::int),
    SUM((outcome NOT IN ('ok', 'timeout', 'unavailable') AND outcome NOT LIKE 'refused:%')::int),
    SUM((outcome LIKE 'refused:%')::int),
    SUM((outcome = 'timeout')::int),
    SUM((outcome = 'unavailable')::int),
    SUM((outcome = 'ok' AND detail = 'no match')::int),
    SUM(CASE WHEN outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' THEN duration_ms ELSE 0 END),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms < 1)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1 AND duration_ms < 1.5)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1.5 AND duration_ms < 2)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 2 AND duration_ms < 3)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 3 AND duration_ms < 5)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 5 AND duration_ms < 7.5)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 7.5 AND duration_ms < 10)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 10 AND duration_ms < 15)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 15 AND duration_ms < 20)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 20 AND duration_ms < 30)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 30 AND duration_ms < 50)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 50 AND duration_ms < 75)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 75 AND duration_ms < 100)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 100 AND duration_ms < 150)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 150 AND duration_ms < 200)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 200 AND duration_ms < 300)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 300 AND duration_ms < 500)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 500 AND duration_ms < 750)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 750 AND duration_ms < 1000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1000 AND duration_ms < 1500)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 1500 AND duration_ms < 2000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 2000 AND duration_ms < 3000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 3000 AND duration_ms < 5000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 5000 AND duration_ms < 7500)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 7500 AND duration_ms < 10000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 10000 AND duration_ms < 15000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 15000 AND duration_ms < 20000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 20000 AND duration_ms < 30000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 30000 AND duration_ms < 60000)::int),
    SUM((outcome NOT LIKE 'refused:%' AND outcome <> 'unavailable' AND duration_ms >= 60000)::int)
FROM audit CROSS JOIN (VALUES (60), (600), (3600)) AS spans (span)
WHERE outcome NOT IN ('sampling', 'elicitation')
GROUP BY spans.span, bucket, tool;
-- What happened to each server: its connection's states, restarts, configuration changes.
CREATE TABLE IF NOT EXISTS server_events (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    epoch DOUBLE PRECISION NOT NULL,
    server TEXT NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS server_events_by_time ON server_events (epoch);
CREATE INDEX IF NOT EXISTS server_events_by_server ON server_events (server, epoch);
