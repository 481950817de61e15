-- Two more kinds of rollup row, so that the dashboard's first read of a window sums hundreds of
-- rows rather than tens of thousands: per bucket, a row for all tools together (tool '*', at 1, 10
-- and 60 minutes), which the unfiltered series reads alone; per tool, a row per day (span 86400),
-- which the totals per tool over a window read for its whole days. The same trigger keeps them
-- (counted once, as before: it fires only for the rows actually inserted); the rows already
-- counted are added up from the rollup itself. An index by tool serves the reads of a few tools.
-- The rows already counted: all tools per bucket, and each tool per day.
INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
SELECT span, start, '*', SUM(ok), SUM(tool_error), SUM(refused), SUM(timeout), SUM(down), SUM(no_match), SUM(total_ms), SUM(b0), SUM(b1), SUM(b2), SUM(b3), SUM(b4), SUM(b5), SUM(b6), SUM(b7), SUM(b8), SUM(b9), SUM(b10), SUM(b11), SUM(b12), SUM(b13), SUM(b14), SUM(b15), SUM(b16), SUM(b17), SUM(b18), SUM(b19), SUM(b20), SUM(b21), SUM(b22), SUM(b23), SUM(b24), SUM(b25), SUM(b26), SUM(b27), SUM(b28), SUM(b29)
FROM audit_rollup WHERE span IN (60, 600, 3600) GROUP BY span, start;
INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
SELECT 86400, CAST(start / 86400 AS INTEGER) * 86400 AS day, tool, SUM(ok), SUM(tool_error), SUM(refused), SUM(timeout), SUM(down), SUM(no_match), SUM(total_ms), SUM(b0), SUM(b1), SUM(b2), SUM(b3), SUM(b4), SUM(b5), SUM(b6), SUM(b7), SUM(b8), SUM(b9), SUM(b10), SUM(b11), SUM(b12), SUM(b13), SUM(b14), SUM(b15), SUM(b16), SUM(b17), SUM(b18), SUM(b19), SUM(b20), SUM(b21), SUM(b22), SUM(b23), SUM(b24), SUM(b25), SUM(b26), SUM(b27), SUM(b28), SUM(b29)
FROM audit_rollup WHERE span = 3600 AND tool <> '*' GROUP BY day, tool;
-- The trigger, now writing each row's seven rollup rows (three spans for its tool and for all
-- tools, and its tool's day) in one statement.
DROP TRIGGER IF EXISTS audit_rollup_kept;
CREATE TRIGGER audit_rollup_kept AFTER INSERT ON audit
WHEN NEW.outcome NOT IN ('sampling', 'elicitation')
BEGIN
    INSERT INTO audit_rollup (span, start, tool, ok, tool_error, refused, timeout, down, no_match, total_ms, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29)
    SELECT spans.span, CAST(NEW.epoch / spans.span AS INTEGER) * spans.span, spans.tool,
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
        (SELECT 60 AS span, NEW.tool AS tool UNION ALL SELECT 600, NEW.tool UNION ALL SELECT 3600, NEW.tool UNION ALL SELECT 86400, NEW.tool UNION ALL SELECT 60, '*' UNION ALL SELECT 600, '*' UNION ALL SELECT 3600, '*') AS spans WHERE 1
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
CREATE INDEX IF NOT EXISTS audit_rollup_by_tool ON audit_rollup (span, tool, start);
