"""The `mcp` SDK's packages without the imports of their `__init__`, so a process loads only the SDK
modules it uses.

Importing any SDK module runs the `__init__` of each package above it, and those of `mcp`,
`mcp.client`, `mcp.server` and `mcp.server.mcpserver` import most of the SDK for their re-exports:
the high-level client (`Client`, with its HTTP transports) and the high-level server framework
(`MCPServer`, its resources, prompts and request-state cryptography), none of which the gateway
serves with. `install()`, called before anything imports the SDK, puts in `sys.modules` a module
for each of those packages that has the package's path and spec, so its submodules import as
usual; the package's own `__init__` runs the first time a name it defines is asked for, so
`from mcp import Client` still works, only later.

Buys: 9.5 MB of a serving process's RSS and 64 modules fewer (docs/performance.md). It uses no
private name of the SDK, only that these four are packages, and must run before any SDK module is
imported, so it is not part of the seams (`gateway.frontdoors.sdkserver`,
`gateway.upstreams.sdkclient`), which import the SDK. Public replacement: re-exports resolved on
first use in the SDK's own `__init__` modules (docs/sdk-seam.md). Remove when the SDK has them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

PACKAGES = ("mcp", "mcp.client", "mcp.server", "mcp.server.mcpserver")


def install() -> None:
    """Stand in for the SDK's packages whose `__init__` imports what the gateway does not use.

    A package already imported is left as it is; parents come before children in `PACKAGES`, so
    each child's spec is found through its lazy parent's path."""
    for name in PACKAGES:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__getattr__"] = _on_demand(module)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def _on_demand(module: ModuleType) -> object:
    """The module's `__getattr__`: a submodule of that name is imported; any other name runs the
    package's own `__init__` (once) and is looked up in what it defined."""
    ran = False

    def __getattr__(name: str) -> object:
        nonlocal ran
        if name.startswith("__") and name != "__all__":
            raise AttributeError(name)
        qualified = f"{module.__name__}.{name}"
        if qualified in sys.modules or importlib.util.find_spec(qualified) is not None:
            return importlib.import_module(qualified)
        if not ran:
            ran = True
            spec = module.__spec__
            assert spec is not None and spec.loader is not None
            spec.loader.exec_module(module)
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

    return __getattr__
