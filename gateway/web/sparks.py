"""The last 24 hours of calls and errors as sparklines, for a tool's page and each row of the
servers page: one read of the audit rollup's hourly buckets."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import anyio
from markupsafe import Markup

from gateway.pipeline.rollup import Rollup
from gateway.service import Gateway
from gateway.web.charts import sparkline
from gateway.web.figures import SPARK, Spark, sparklines
from gateway.web.words import counted


def drawn(name: str, spark: Spark, over: str = "hourly over the last 24 hours") -> Markup:
    """`spark` (of `name`, its points `over` a window) as a small chart named for what it shows."""
    label = f"{name}, {over}: {counted(spark.total, 'call')}, {spark.failed} not ok"
    return sparkline(spark.calls, spark.errors, label)


async def sparks(gateway: Gateway, tools: Iterable[str], key: Callable[[str], str | None]) -> dict[str, Spark]:
    """The hourly calls and errors of `tools` over the last 24 hours, summed per name `key` gives each tool."""
    axis = SPARK.axis(gateway.wall_now())
    rollup = Rollup(gateway.audit.database)
    series = await anyio.to_thread.run_sync(rollup.series, SPARK.step, axis[0], axis[-1], set(tools))
    return sparklines(series, axis, key)


def empty() -> Spark:
    """A sparkline of no calls."""
    return Spark((0,) * SPARK.points, (0,) * SPARK.points)
