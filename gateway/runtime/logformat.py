"""How log lines look: plain text for people, or one JSON object a line for log collectors.

A JSON line has `time` (ISO 8601 UTC), `level`, `logger`, `message`, `request_id` when the line
was written while handling a client call (see `gateway.runtime.requestid`), `trace_id` when it was
written while handling a traced request (see `gateway.runtime.tracing`) and `exception` when one was
logged. Secrets are already gone: the redacting filter on the handler runs before the formatter.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Literal

from gateway.runtime import requestid, tracing

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = requestid.current()
        if request_id is not None:
            line["request_id"] = request_id
        trace_id = tracing.trace_id()
        if trace_id:
            line["trace_id"] = trace_id
        if record.exc_info is not None and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def formatter(kind: LogFormat) -> logging.Formatter:
    """The formatter of a `--log-format`."""
    return JsonFormatter() if kind == "json" else logging.Formatter(TEXT_FORMAT)
