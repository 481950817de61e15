"""Charts as SVG written on the server (pure): stacked bars, lines, sparklines and timelines.

No script draws them and no style attribute colours them: each shape has a class the page's
stylesheet colours (`web.css`), so they pass the page's CSP as they are. Each chart is an image
with a name that says what it shows (`role="img"`, `aria-label`); the page puts the numbers in a
table beside it. A `viewBox` scales them to the width there is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 600, 160
SPARK_WIDTH, SPARK_HEIGHT = 96, 24
LANE = 22
"""The height of one server's lane in a timeline."""


def slug(name: str) -> str:
    """The class suffix of a series name: `tool error` -> `tool-error`."""
    return name.replace(" ", "-")


def _svg(width: float, height: float, label: str, body: list[str], kind: str, fluid: bool = True) -> Markup:
    # As wide as there is room for (a sparkline keeps its size), as high as drawn.
    size = f'width="100%" height="{height:g}"' if fluid else f'width="{width:g}" height="{height:g}"'
    return Markup(
        f'<svg class="chart {kind}" {size} viewBox="0 0 {width:g} {height:g}" preserveAspectRatio="none"'
        f' role="img" aria-label="{escape(label)}" focusable="false">{"".join(body)}</svg>'
    )


def _bars(boxes: list[tuple[float, float, float, float]]) -> str:
    """Rectangles (x, y, width, height) as one path's data: one element however many bars."""
    return "".join(f"M{x:.1f} {y:.1f}h{w:.1f}v{h:.1f}h{-w:.1f}z" for x, y, w, h in boxes)


def stacked(points: Sequence[Mapping[str, int]], series: Sequence[str], label: str) -> Markup:
    """One bar per point, its `series` stacked bottom up, scaled to the highest bar; a path per series."""
    top = max((sum(point.get(name, 0) for name in series) for point in points), default=0) or 1
    width = WIDTH / max(len(points), 1)
    boxes: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in series}
    for index, point in enumerate(points):
        floor = float(HEIGHT)
        for name in series:
            count = point.get(name, 0)
            if count:
                height = HEIGHT * count / top
                floor -= height
                boxes[name].append((index * width, floor, max(width - 1, 0.5), height))
    body = [f'<line class="axis" x1="0" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}"/>']
    body += [f'<path class="s-{slug(name)}" d="{_bars(found)}"/>' for name, found in boxes.items() if found]
    return _svg(WIDTH, HEIGHT, label, body, "stacked")


def lines(series: Mapping[str, Sequence[float | None]], label: str) -> Markup:
    """One line per series, scaled to the highest value; a point without a value breaks its line."""
    top = max((value for values in series.values() for value in values if value is not None), default=0) or 1
    body = [f'<line class="axis" x1="0" y1="{HEIGHT}" x2="{WIDTH}" y2="{HEIGHT}"/>']
    for name, values in series.items():
        step = WIDTH / max(len(values) - 1, 1)
        run: list[str] = []
        for index, value in enumerate([*values, None]):
            if value is not None:
                run.append(f"{index * step:.1f},{HEIGHT - (HEIGHT - 4) * value / top:.1f}")
                continue
            if len(run) == 1:
                x, y = run[0].split(",")
                body.append(f'<circle class="l-{slug(name)}" cx="{x}" cy="{y}" r="2"/>')
            elif run:
                body.append(f'<polyline class="l-{slug(name)}" points="{" ".join(run)}"/>')
            run = []
    return _svg(WIDTH, HEIGHT, label, body, "lines")


def sparkline(calls: Sequence[int], errors: Sequence[int], label: str) -> Markup:
    """A small bar per point: its calls, its errors drawn over them."""
    top = max(calls, default=0) or 1
    width = SPARK_WIDTH / max(len(calls), 1)
    body = []
    for kind, values in (("calls", calls), ("errors", errors)):
        boxes = []
        for index, value in enumerate(values):
            if value:
                height = max(SPARK_HEIGHT * value / top, 1.0)
                boxes.append((index * width, SPARK_HEIGHT - height, max(width - 0.5, 0.5), height))
        if boxes:
            body.append(f'<path class="spark-{kind}" d="{_bars(boxes)}"/>')
    body.append(f'<line class="axis" x1="0" y1="{SPARK_HEIGHT}" x2="{SPARK_WIDTH}" y2="{SPARK_HEIGHT}"/>')
    return _svg(SPARK_WIDTH, SPARK_HEIGHT, label, body, "spark", fluid=False)


Lane = tuple[str, Sequence[tuple[float, float, str]], Sequence[tuple[float, str]]]
"""A timeline's lane: its name, its segments (start, end, state) and its marks (when, event)."""


def timeline(lanes: Sequence[Lane], start: float, end: float, label: str) -> Markup:
    """One lane per server: its states as coloured stretches, its restarts and changes as ticks."""
    span = (end - start) or 1
    body = []
    for row, (_, segments, marks) in enumerate(lanes):
        top = row * LANE
        for begin, finish, state in segments:
            x = WIDTH * (begin - start) / span
            width = max(WIDTH * (finish - begin) / span, 0.5)
            body.append(
                f'<rect class="h-{slug(state)}" x="{x:.2f}" y="{top + 3}" width="{width:.2f}" height="{LANE - 6}"/>'
            )
        for epoch, event in marks:
            x = WIDTH * (epoch - start) / span
            body.append(f'<line class="mark-{slug(event)}" x1="{x:.2f}" y1="{top}" x2="{x:.2f}" y2="{top + LANE}"/>')
    return _svg(WIDTH, max(len(lanes), 1) * LANE, label, body, "timeline")
