"""The SDK's internals are reached in two modules only, each name as they expect it.

`gateway/frontdoors/sdkserver.py` and `gateway/upstreams/sdkclient.py` are the seams: no other module
imports a private name or module of `mcp`, `mcp_types` or Starlette, reaches a private attribute
that a class of the SDK defines, or overrides one; and each name a seam uses is in its
`SDK_PRIVATE`, found in the installed SDK with the signature (or annotation) written there, so an
SDK release that moves or changes one fails here, by name.

The rule for attributes is approximate: a private attribute counts as the SDK's when a module or a
class of `mcp` or `mcp_types` defines that name and no class of the module reading it does.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import textwrap
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from gateway.frontdoors import sdkserver
from gateway.upstreams import sdkclient
from tests.support.harness import REPO

PACKAGE = REPO / "gateway"
SEAMS: dict[Path, ModuleType] = {
    PACKAGE / "frontdoors" / "sdkserver.py": sdkserver,
    PACKAGE / "upstreams" / "sdkclient.py": sdkclient,
}
SDK = ("mcp", "mcp_types")
WATCHED = (*SDK, "starlette")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _self_assigned(node: ast.AST) -> Iterator[tuple[str, ast.expr | None]]:
    """The private attributes assigned on `self` under `node`, each with its annotation (None: none)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign):
            targets, annotation = sub.targets, None
        elif isinstance(sub, ast.AnnAssign | ast.AugAssign):
            targets, annotation = [sub.target], sub.annotation if isinstance(sub, ast.AnnAssign) else None
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and _private(target.attr) and _is_self(target.value):
                yield target.attr, annotation


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _class_defined(cls: ast.ClassDef) -> set[str]:
    """The private names a class statement defines: methods, class attributes, attributes of `self`."""
    names = {name for name, _ in _self_assigned(cls)}
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(item.name)
        elif isinstance(item, ast.Assign):
            names |= {target.id for target in item.targets if isinstance(target, ast.Name)}
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    return {name for name in names if _private(name)}


def _classes(tree: ast.AST) -> Iterator[ast.ClassDef]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef))


def _module_defined(tree: ast.Module) -> set[str]:
    """The private names a module defines at its top level: functions, classes, variables."""
    names: set[str] = set()
    for item in tree.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(item.name)
        elif isinstance(item, ast.Assign):
            names |= {target.id for target in item.targets if isinstance(target, ast.Name)}
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    return {name for name in names if _private(name)}


@cache
def _sdk_attributes() -> frozenset[str]:
    """Every private name a module or a class of the installed SDK defines (a module's as
    `module._name`, a class's as `instance._name`)."""
    names: set[str] = set()
    for package in SDK:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.origin is not None
        for path in Path(spec.origin).parent.rglob("*.py"):
            tree = ast.parse(path.read_text())
            names |= _module_defined(tree)
            for cls in _classes(tree):
                names |= _class_defined(cls)
    return frozenset(names)


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text())


def _private_imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each import of a private module or name of the SDK or Starlette: its line and what it names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in WATCHED and any(map(_private, parts)):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in WATCHED:
            private_module = any(map(_private, node.module.split(".")))
            for alias in node.names:
                if private_module or _private(alias.name):
                    yield node.lineno, alias.name


def _sdk_attribute_uses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each read or write of a private attribute that the SDK's classes define and this module's do not."""
    own = set().union(*(_class_defined(cls) for cls in _classes(tree)))
    sdk = _sdk_attributes()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in sdk and node.attr not in own:
            yield node.lineno, node.attr


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def _sdk_overrides(path: Path, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Each private name that a class of this module defines and a class of the SDK or Starlette it
    derives from defines too."""
    statements = [cls for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.bases]
    if not statements:
        return
    module = importlib.import_module(_module_name(path))
    for statement in statements:
        cls = getattr(module, statement.name)
        inherited: set[str] = set()
        for base in cls.__mro__[1:]:
            if base.__module__.split(".")[0] in WATCHED:
                inherited |= {name for name in vars(base) if _private(name)}
                inherited |= {name for name, _ in _self_assigned(ast.parse(textwrap.dedent(inspect.getsource(base))))}
        for name in sorted(_class_defined(statement) & inherited):
            yield statement.lineno, name


def _uses(path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """Each use of a private name of the SDK or Starlette in a module: its line and what it does."""
    return [
        *((line, f"imports {name}") for line, name in _private_imports(tree)),
        *((line, f"reads or writes {name}") for line, name in _sdk_attribute_uses(tree)),
        *((line, f"overrides {name}") for line, name in _sdk_overrides(path, tree)),
    ]


def test_no_module_but_the_two_seams_uses_a_private_name_of_the_sdk_or_starlette() -> None:
    found = {}
    for path, tree in _modules():
        uses = [] if path in SEAMS else _uses(path, tree)
        if uses:
            found[str(path.relative_to(REPO))] = [f"line {line}: {use}" for line, use in uses]
    assert found == {}


@pytest.mark.parametrize("path", sorted(SEAMS), ids=lambda path: path.name)
def test_a_seam_lists_every_private_name_it_uses_and_uses_every_name_it_lists(path: Path) -> None:
    tree = ast.parse(path.read_text())
    used = {use.split()[-1] for _, use in _uses(path, tree)}
    listed = {key.rpartition(".")[2].rpartition(":")[2] for key in SEAMS[path].SDK_PRIVATE}
    assert used == listed


def _located(key: str) -> tuple[type | None, str, object]:
    """The class holding the name `key` ("module:Class.name" or "module:name") names, the name, and
    the object it names (None for an attribute of instances)."""
    module_name, _, qualified = key.partition(":")
    owner: object = importlib.import_module(module_name)
    *path, name = qualified.split(".")
    for part in path:
        owner = getattr(owner, part)
    if not isinstance(owner, type):
        return None, name, getattr(owner, name)
    for cls in owner.__mro__:
        if name in vars(cls):
            return owner, name, vars(cls)[name]
    return owner, name, None


def _as_written(cls: type | None, name: str, found: object) -> str | None:
    """How the SDK's source writes `name`: a function's parameters and return, an attribute's
    annotation ("attribute" when it has none); None when the source does not define it."""
    if inspect.isfunction(found) or inspect.isfunction(getattr(found, "__wrapped__", None)):
        assert callable(found)
        statement = ast.parse(textwrap.dedent(inspect.getsource(found))).body[0]
        assert isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef)
        returns = f" -> {ast.unparse(statement.returns)}" if statement.returns else ""
        return f"({ast.unparse(statement.args)}){returns}"
    assert cls is not None
    for base in cls.__mro__:
        if not base.__module__.startswith(SDK):
            continue
        statement = ast.parse(textwrap.dedent(inspect.getsource(base))).body[0]
        assert isinstance(statement, ast.ClassDef)
        for item in statement.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == name:
                return ast.unparse(item.annotation)
        annotations = [annotation for assigned, annotation in _self_assigned(statement) if assigned == name]
        if annotations:
            written = [annotation for annotation in annotations if annotation is not None]
            return ast.unparse(written[0]) if written else "attribute"
    return None


LISTED = [item for seam in SEAMS.values() for item in seam.SDK_PRIVATE.items()]


@pytest.mark.parametrize(("key", "expected"), LISTED, ids=[key.rpartition(":")[2] for key, _ in LISTED])
def test_each_private_name_a_seam_uses_is_in_the_installed_sdk_as_the_seam_expects(key: str, expected: str) -> None:
    cls, name, found = _located(key)
    assert _as_written(cls, name, found) == expected
