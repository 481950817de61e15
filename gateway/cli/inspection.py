"""Commands that read a configuration and its data directory: `check`, `catalog`, `audit`, `approvals`,
`workspaces` and `client-config`."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.config.clientfiles import gateway_snippet, stdio_command
from gateway.runtime.datadir import make_private

if TYPE_CHECKING:
    from gateway.config.model import GatewayConfig
    from gateway.service import Gateway

from gateway.cli import admin
from gateway.cli.serving import group_known

CATALOG_FILTERS = {
    "q": "only tools whose name, title or description holds this text",
    "server": "only this server's tools",
    "tag": "only tools with this tag",
    "risk": "only tools of this risk (low, medium, high)",
    "layer": "only tools of this layer (core, extended)",
    "group": "only this tool group's tools",
}


def client_config(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Print the snippet of a client's configuration file that connects it to the gateway or a group."""
    stdio = args.stdio or (args.client == "claude-desktop" and args.url is None)
    if args.client == "claude-desktop" and not stdio:
        print("error: Claude Desktop's file starts servers as commands; leave out --url", file=sys.stderr)
        return 2
    if stdio:
        if args.group is not None and not group_known(config, args.group):
            return 2
        roles = config.policy.role_names()
        if roles is not None and args.role is None and config.settings.stdio_role is None:
            print(
                f"error: {config.path} has roles ({', '.join(sorted(roles))}); a stdio client without one "
                "sees only the meta-tools: give --role",
                file=sys.stderr,
            )
            return 2
        command = stdio_command(config.path if args.config is not None else None, args.caller, args.role)
        snippet = gateway_snippet(args.client, args.group, stdio_command=command)
    else:
        url = args.url or admin.DEFAULT_URL
        snippet = gateway_snippet(args.client, args.group, base_url=url, authorized=config.auth.enabled)
    print(json.dumps(snippet, indent=2))
    return 0


def check(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Say whether the configuration is valid, and what each server, skill and sandbox gives."""
    import anyio

    from gateway.cli.tokencheck import read_token, token_report
    from gateway.service import START_GRACE, Gateway
    from gateway.upstreams.connection import State
    from gateway.upstreams.workspaces import PRIVILEGED

    async def run() -> int:
        async with Gateway(config, serving=False) as gateway:
            failed = False
            waited = config.settings.upstream_connect_timeout + START_GRACE
            print(f"config: {config.path} (valid)")
            for note in config.notes:
                print(f"  note: {note}")
            for status in gateway.servers.statuses():
                if not status.enabled:
                    print(f"  [off] {status.name} ({status.transport}): disabled, not started")
                    continue
                mark = "ok" if status.state == State.READY else "FAIL"
                required = " required" if status.required else ""
                reason = status.error or ("" if status.state == State.READY else f"not connected after {waited:g} s")
                detail = f" - {reason}" if reason else ""
                print(f"  [{mark}] {status.name} ({status.transport}{required}): {status.tools} tools{detail}")
                failed = failed or (status.required and status.state != State.READY)
            for name, source in gateway.local_sources.items():
                print(f"  [ok] {name} (local): {len(source.records)} tools")
            for clash in gateway.catalog.clashes:
                print(f"  warning: {clash.describe()}")
            for left in gateway.catalog.withheld:
                print(f"  warning: {left.describe()}")
            if gateway.sandboxes.docker is not None:
                ready, reason = gateway.sandboxes.availability()
                sandboxed = sum(1 for tool in gateway.catalog.tools if tool.sandbox)
                unavailable = "" if ready else ", whose tools are unavailable"
                print(f"  [{'ok' if ready else 'FAIL'}] sandbox: {reason} ({sandboxed} sandboxed tools{unavailable})")
            workspaces = gateway.workspaces
            if workspaces.unlimited is None:
                limit, kept = _size(workspaces.size), f"{workspaces.retention:g} s"
                print(f"  [ok] workspaces: at most {limit} each, kept {kept} after their session ends")
            else:
                print(f"  warning: workspaces are not size-limited: {workspaces.unlimited}")
            for name in workspaces.privileged:
                print(f"  warning: server {name} {PRIVILEGED}")
            print(f"catalog: {len(gateway.catalog.tools)} tools")
            for row in _skill_rows(gateway):
                print(f"  [ok] skill {row['name']} ({row['lifecycle']}): {len(row['tools'])} tools")
            # A broken skill folder does not stop the gateway, but it is a fault the operator must see.
            for problem in gateway.skills.skills.problems:
                print(f"  [FAIL] skill {problem}")
            failed = failed or bool(gateway.skills.skills.problems)
            if config.settings.find_tools_model != "none":
                unloaded = await anyio.to_thread.run_sync(gateway.skills.check_semantic)
                model = config.settings.find_tools_model
                if unloaded is None:
                    print(f"  [ok] Find_Tools ranks by words and meaning ({model})")
                else:
                    print(f"  warning: Find_Tools ranks by word matching alone: {unloaded}")
            if args.token is not None:
                accepted, lines = await token_report(gateway.authenticator, read_token(args.token))
                print("\n".join(lines))
                failed = failed or not accepted
            return 1 if failed else 0

    return anyio.run(run)


def _skill_rows(gateway: Gateway) -> list[dict[str, Any]]:
    """Each loaded skill with its lifecycle and the catalog tools it brings."""
    return [
        {
            "name": skill.name,
            "lifecycle": skill.lifecycle,
            "roles": list(skill.roles),
            "tools": gateway.skills.members(skill.name),
            "description": skill.description,
        }
        for skill in (gateway.skills.skills.skills[name] for name in gateway.skills.names)
    ]


def catalog(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Print the tools (and skills) the configuration gives, as a table or JSON."""
    import anyio

    from gateway.auth.policy import derive_risk
    from gateway.catalog.poisoning import visible
    from gateway.service import Gateway

    filters = [f"--{name}" for name in CATALOG_FILTERS if getattr(args, name)]
    if filters:
        print(f"error: {', '.join(filters)} filter the running gateway's catalog: drop --config", file=sys.stderr)
        return 2

    async def run() -> dict[str, Any]:
        async with Gateway(config, serving=False) as gateway:
            tools = [
                {
                    "name": tool.name,
                    "source": tool.source,
                    "original_name": tool.original_name,
                    "layer": tool.layer,
                    "risk": derive_risk(tool).value,
                    "sandbox": tool.sandbox,
                    "available": not tool.sandbox or gateway.sandboxes.availability()[0],
                    "read_only": tool.read_only,
                    "description": tool.description,
                    "flags": [finding.as_json() for finding in gateway.flags.of(tool)],
                }
                for tool in gateway.catalog.tools
            ]
            problems = [
                {"path": str(problem.path), "reason": problem.reason} for problem in gateway.skills.skills.problems
            ]
            return {"tools": tools, "skills": _skill_rows(gateway), "skill_problems": problems}

    catalog = anyio.run(run)
    if args.json:
        print(json.dumps(catalog, indent=2))
        return 0
    rows = catalog["tools"]
    width = max((len(row["name"]) for row in rows), default=4)
    header = f"{'NAME':<{width}}  {'SOURCE':<10}  {'RISK':<6}  {'SANDBOX':<11}  {'LAYER':<8}  {'FLAGGED':<20}"
    print(f"{header}  DESCRIPTION")
    for row in rows:
        summary = visible("".join((row["description"] or "").strip().splitlines()[0:1])[:80])
        sandbox = row["sandbox"] or "-"
        flagged = ",".join(dict.fromkeys(flag["kind"] for flag in row["flags"])) or "-"
        print(
            f"{row['name']:<{width}}  {row['source']:<10}  {row['risk']:<6}  {sandbox:<11}  {row['layer']:<8}"
            f"  {flagged:<20}  {summary}"
        )
    for row in rows:
        for flag in row["flags"]:
            print(f"flagged: {row['name']}: {flag['reason']} in {flag['where']}: {flag['excerpt']}")
    for skill in catalog["skills"]:
        print(f"skill {skill['name']} ({skill['lifecycle']}): {' '.join(skill['tools']) or 'no tools'}")
    for problem in catalog["skill_problems"]:
        print(f"warning: skill not loaded: {problem['path']}: {problem['reason']}")
    return 0


def audit(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Print the audit's most recent calls."""
    import anyio

    from gateway.pipeline.audit import AuditError, AuditStore

    try:
        store = AuditStore.open(config.store, Path(config.settings.data_dir))
    except AuditError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1

    async def run() -> int:
        entries = await store.recent(args.limit, session=args.session, tool=args.tool)
        for entry in entries:
            print(
                f"{entry.time}  {entry.session[:16]:<16}  {entry.caller:<12}  {entry.tool:<32}  "
                f"{entry.outcome:<20}  {entry.duration_ms:8.1f} ms  {entry.request_id or '-':<32}  "
                f"{entry.parent_request_id or '-':<32}  {entry.detail[:60]}"
            )
        return 0

    try:
        return anyio.run(run)
    finally:
        store.close()


def approvals(config: GatewayConfig, args: argparse.Namespace) -> int:
    """List, approve or decline the calls waiting for a person, in the data directory: whoever can
    run this on the gateway's data directory is the person who approves."""
    import anyio

    from gateway.pipeline.approvals import (
        ApprovalClosedError,
        ApprovalNotFoundError,
        ApprovalStore,
        ApprovalStoreError,
        decision_entry,
    )
    from gateway.pipeline.audit import AuditStore
    from gateway.stores import DatabaseError

    data_dir = Path(config.settings.data_dir)
    make_private(data_dir)
    try:
        store = ApprovalStore.open(config.store, data_dir)
    except ApprovalStoreError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    try:
        if args.action == "list":
            print(f"{'ID':<15}  {'CALLER':<12}  {'TOOL':<32}  {'LEFT':>6}  ARGUMENTS")
            for approval in store.pending():
                left = max(0, round(approval.expires - store.clock()))
                print(
                    f"{approval.id}  {approval.caller:<12}  {approval.tool:<32}  {left:>5}s  {approval.arguments[:200]}"
                )
            return 0
        if args.id is None:
            print(f"error: approvals {args.action} needs the id of an approval", file=sys.stderr)
            return 2
        try:
            decided = store.decide(args.id, args.action == "approve", "cli")
        except (ApprovalNotFoundError, ApprovalClosedError) as error:
            print(f"error: {error.message}", file=sys.stderr)
            return 1
    except DatabaseError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    audit = AuditStore.open(config.store, data_dir)
    try:
        anyio.run(audit.record, decision_entry(decided))
    finally:
        audit.close()
    print(f"{decided.id} {decided.status.value}: {decided.tool} for {decided.caller}")
    return 0


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count:g} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


def workspaces(config: GatewayConfig, args: argparse.Namespace) -> int:
    """List the sessions' workspaces: their size, and when each ended and is purged."""
    from gateway.upstreams.workspaces import Workspaces

    workspaces = Workspaces(Path(config.settings.data_dir) / "workspaces", config.settings, {})
    if args.action == "purge":
        removed = workspaces.sweep()
        print(f"removed {len(removed)} workspaces")
        return 0
    retention = config.settings.workspace_retention
    for workspace in workspaces.entries():
        if workspace.ended_at is None:
            state = "in use (or left by a gateway that stopped)"
        else:
            ended = datetime.fromtimestamp(workspace.ended_at, UTC).isoformat(timespec="seconds")
            purge = datetime.fromtimestamp(workspace.ended_at + retention, UTC).isoformat(timespec="seconds")
            state = f"ended {ended}, purged after {purge}"
        print(f"{workspace.path}  {_size(workspace.used):>10}  {state}")
    return 0
