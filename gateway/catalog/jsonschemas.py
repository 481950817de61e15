"""Tool schemas (input and output) compiled once per schema object, for the checks made on every call.

Each schema gets two validators. jsonschema's is the authority: it alone says what is wrong with
an instance, in the messages callers show. jsonschema-rs's only accepts: when it finds an
instance valid, the check is done, some 40 times faster (0.15 against 6.3 us for an echo tool's
arguments, and the Python one walks a deep stack of calls on every call); when it finds the
instance invalid, or cannot judge it, jsonschema judges it. The fast one is built offline (a `$ref`
it would have to fetch makes the schema jsonschema's alone) and, like jsonschema without a format
checker, treats `format` as an annotation. A schema it cannot compile (a pattern outside its
regex dialect, a draft it does not know) is checked by jsonschema alone.

jsonschema-rs is imported with the first schema compiled, that is at a gateway's first call:
its library adds 4.7 MB to the process (15 ms to import), which a gateway that only lists, and
the commands that never call a tool, do without.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsonschema
from jsonschema.protocols import Validator

if TYPE_CHECKING:
    import jsonschema_rs


@dataclass(frozen=True, slots=True)
class Compiled:
    """One schema's validators: `validator` (jsonschema) judges, `fast` (jsonschema-rs) may accept."""

    validator: Validator
    fast: jsonschema_rs.Validator | None

    def accepts(self, instance: Any) -> bool:
        """True when `instance` is certainly valid; False means ask `validator`."""
        if self.fast is None:
            return False
        try:
            return self.fast.is_valid(instance)
        except ValueError:
            # A value it cannot take (a key that is not a string, bytes): jsonschema judges.
            return False


class SchemaCache:
    """Compiled schemas by identity (a catalog entry keeps its schema object for its life), the
    `size` most recently used."""

    def __init__(self, size: int) -> None:
        self._size = size
        # Keyed by id(); the schema is kept alive in the value so the id cannot be reused.
        self._entries: OrderedDict[int, tuple[Mapping[str, Any], Compiled]] = OrderedDict()

    def get(self, schema: Mapping[str, Any]) -> Compiled:
        """`schema` compiled; raises `jsonschema.SchemaError` for a schema its draft's meta-schema
        rejects, and whatever checking it raised before judging (see `compile_schema`)."""
        key = id(schema)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is schema:
            self._entries.move_to_end(key)
            return entry[1]
        compiled = compile_schema(schema)
        self._entries[key] = (schema, compiled)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return compiled


def compile_schema(schema: Mapping[str, Any]) -> Compiled:
    """Both validators for `schema`, of the draft its `$schema` names (2020-12 by default).

    Raises `jsonschema.SchemaError` when the meta-schema rejects it; checking can also fail before
    judging (`$schema` not a string, nesting past the recursion limit) with that failure's error.
    """
    kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    kind.check_schema(dict(schema))
    return Compiled(kind(schema), _fast(schema))


def _fast(schema: Mapping[str, Any]) -> jsonschema_rs.Validator | None:
    import jsonschema_rs  # 4.7 MB: loaded with the first schema compiled, not by a gateway that only lists

    try:
        return jsonschema_rs.validator_for(dict(schema), validate_formats=False, offline=True)
    except ValueError:  # its ValidationError (a schema it rejects or cannot resolve) is one
        return None
