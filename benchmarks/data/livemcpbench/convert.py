"""Rebuild catalog.json and tasks.json from a checkout of LiveMCPBench (Apache-2.0).

Run `python benchmarks/data/livemcpbench/convert.py <checkout>`: it reads
`tools/LiveMCPTool/tools.json` and `annotated_data/all_annotations.json` and keeps only what
tool retrieval needs: each server's key, name and description, and each tool's name, description
and input schema (without `$schema`); each task's question, steps and needed tools.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def catalog(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per server, named by its configuration key."""
    servers = []
    for entry in tools:
        for key, served in entry["tools"].items():
            servers.append(
                {
                    "server": key,
                    "title": entry["name"],
                    "description": entry["description"],
                    "category": entry["category"],
                    "tools": [
                        {
                            "name": tool["name"],
                            "description": tool.get("description") or "",
                            "input_schema": {
                                key: value for key, value in (tool.get("inputSchema") or {}).items() if key != "$schema"
                            },
                        }
                        for tool in served["tools"]
                    ],
                }
            )
    return servers


def _numbered(text: str) -> list[str]:
    """The items of a "1. ...\\n2. ..." list."""
    return [re.sub(r"^\s*\d+\.\s*", "", line).strip() for line in text.split("\n") if line.strip()]


def tasks(annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Question, steps and needed tool names of each task."""
    return [
        {
            "id": task["task_id"],
            "category": task["category"],
            "question": task["Question"],
            "steps": _numbered(task["Annotator Metadata"]["Steps"]),
            "tools": _numbered(task["Annotator Metadata"]["Tools"]),
        }
        for task in annotations
    ]


def main() -> None:
    """Write the two files beside this script."""
    root = Path(sys.argv[1])
    tools = json.loads((root / "tools/LiveMCPTool/tools.json").read_text(encoding="utf-8"))
    annotations = json.loads((root / "annotated_data/all_annotations.json").read_text(encoding="utf-8"))
    for name, data in (("catalog.json", catalog(tools)), ("tasks.json", tasks(annotations))):
        lines = ",\n".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in data)
        (HERE / name).write_text(f"[\n{lines}\n]\n", encoding="utf-8")


if __name__ == "__main__":
    main()
