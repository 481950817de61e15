"""Rebuild tools.json and queries.json from a checkout of MetaTool (MIT).

Run `python benchmarks/data/metatool/convert.py <checkout>`: it reads `dataset/plugin_des.json`
(199 tools, a description each) and `dataset/data/all_clean_data.csv` (20,615 one-tool queries)
and keeps every tool and `PER_TOOL` queries of each, spread over its queries in sorted order.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
PER_TOOL = 4


def main(checkout: Path) -> None:
    """Write tools.json and queries.json beside this file."""
    described = json.loads((checkout / "dataset" / "plugin_des.json").read_text(encoding="utf-8"))
    tools = [{"name": name, "description": text.strip()} for name, text in sorted(described.items())]
    asked: dict[str, list[str]] = {}
    with (checkout / "dataset" / "data" / "all_clean_data.csv").open(encoding="utf-8", newline="") as rows:
        for row in csv.DictReader(rows):
            asked.setdefault(row["Tool"], []).append(row["Query"].strip().strip('"'))
    queries = []
    for tool in sorted(asked):
        texts = sorted(set(asked[tool]))
        step = max(1, len(texts) // PER_TOOL)
        queries += [{"query": text, "tool": tool} for text in texts[::step][:PER_TOOL]]
    (HERE / "tools.json").write_text(json.dumps(tools, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    (HERE / "queries.json").write_text(json.dumps(queries, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
