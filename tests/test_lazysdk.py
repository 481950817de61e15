"""The SDK's packages stand in lazily: serving loads only the SDK modules it uses, and every public
name of the SDK still resolves.

Each test runs in a fresh interpreter: in this one the SDK is already imported."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.harness import REPO

# What the SDK's package `__init__` modules import and the gateway never serves with.
UNUSED = ("mcp.client.client", "mcp.client.session_group", "mcp.server.mcpserver.server", "cryptography")


def _run(probe: str) -> str:
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_serving_modules_load_neither_the_high_level_client_nor_the_server_framework() -> None:
    probe = (
        "import json, sys\n"
        "from gateway.runtime import lazysdk\n"
        "lazysdk.install()\n"
        "import gateway.frontdoors.httpapp, gateway.frontdoors.stdio, gateway.service\n"
        f"print(json.dumps([m for m in {UNUSED!r} if m in sys.modules]))"
    )
    assert json.loads(_run(probe)) == []


def test_a_name_the_sdk_re_exports_resolves_to_the_same_object_after_install() -> None:
    probe = (
        "from gateway.runtime import lazysdk\n"
        "lazysdk.install()\n"
        "import mcp\n"
        "from mcp import Client, StdioServerParameters\n"
        "from mcp.client import ClientRequestContext\n"
        "from mcp.server import MCPServer, Server\n"
        "from mcp.server.mcpserver import Context\n"
        "import mcp.client.client, mcp.client.context, mcp.client.stdio, mcp.server.lowlevel.server\n"
        "import mcp.server.mcpserver.context, mcp.server.mcpserver.server\n"
        "print(Client is mcp.client.client.Client, StdioServerParameters is mcp.client.stdio.StdioServerParameters,\n"
        "      ClientRequestContext is mcp.client.context.ClientRequestContext,\n"
        "      MCPServer is mcp.server.mcpserver.server.MCPServer, Server is mcp.server.lowlevel.server.Server,\n"
        "      Context is mcp.server.mcpserver.context.Context, mcp.types.Tool.__name__)"
    )
    assert _run(probe).split() == ["True"] * 6 + ["Tool"]


def test_a_star_import_of_the_sdk_offers_its_whole_public_list() -> None:
    probe = (
        "from gateway.runtime import lazysdk\n"
        "lazysdk.install()\n"
        "from mcp import *\n"
        "import mcp\n"
        "print(all(name in globals() for name in mcp.__all__), 'ClientSession' in mcp.__all__)"
    )
    assert _run(probe).split() == ["True", "True"]


def test_a_name_the_sdk_does_not_define_is_still_an_attribute_error() -> None:
    probe = (
        "from gateway.runtime import lazysdk\n"
        "lazysdk.install()\n"
        "import mcp\n"
        "try:\n"
        "    mcp.NoSuchName\n"
        "except AttributeError as error:\n"
        "    print(error)"
    )
    assert _run(probe).strip() == "module 'mcp' has no attribute 'NoSuchName'"


def test_install_leaves_an_sdk_already_imported_as_it_is() -> None:
    probe = "import mcp\nfrom gateway.runtime import lazysdk\nbefore = mcp\n"
    probe += "lazysdk.install()\nimport mcp\nprint(mcp is before)"
    assert _run(probe).split() == ["True"]
