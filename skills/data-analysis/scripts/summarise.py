"""Describe numeric columns of a query result: paste the rows in, run it with python__run_python."""

import statistics

# Replace these two with the columns and rows of your query result.
COLUMNS = ["region", "orders", "revenue"]
ROWS = [
    ("north", 120, 10450.5),
    ("south", 98, 8730.0),
    ("east", 143, 12010.25),
    ("west", 77, 6400.75),
]


def numeric_columns(columns, rows):
    """Map each column whose non-empty values are all numbers to those values."""
    found = {}
    for index, name in enumerate(columns):
        values = [row[index] for row in rows if row[index] is not None]
        if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            found[name] = values
    return found


def describe(values):
    """Count, mean, spread and quartiles of a list of numbers."""
    summary = {
        "count": len(values),
        "mean": statistics.fmean(values),
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
    }
    if len(values) >= 2:
        summary["stdev"] = statistics.stdev(values)
        q1, _, q3 = statistics.quantiles(values, n=4)
        summary["q1"], summary["q3"] = q1, q3
    return summary


def readable(value):
    """A number with thousands separators, floats to two decimals."""
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


for column, values in numeric_columns(COLUMNS, ROWS).items():
    missing = len(ROWS) - len(values)
    figures = ", ".join(f"{key}={readable(value)}" for key, value in describe(values).items())
    print(f"{column}: {figures}" + (f" ({missing} empty)" if missing else ""))
