"""A small JSON Schema validator for the arguments of caller-declared tools.

Callers declare their own function tools (``{"name", "description", "parameters"}``). When the
model calls one, the agent checks the arguments here and answers the model with a clear
``Error: ...`` rather than pass bad arguments on. The ``jsonschema`` package would cost the
layer's cold start, and tool schemas use a small subset of the language, so this is that subset:
type, nullable (OpenAPI), enum, const, properties, required, additionalProperties,
patternProperties, min/maxProperties, items, prefixItems, min/maxItems, uniqueItems,
min/maxLength, pattern, minimum, maximum, exclusiveMinimum/Maximum, multipleOf, anyOf, oneOf,
allOf, not, and $ref to local "#/$defs/..." or "#/definitions/...". Other keywords are ignored
(permissive). ``argument_errors`` never raises on a JSON value: the depth of the value, of the
schema and of $ref chains, and the total work, are bounded.

Patterns run on RE2 (``google-re2``), whose matching is linear in the text: Python's ``re``
backtracks, and a declared ``(a+)+$`` took 8.5 s on 24 characters. RE2 has no lookarounds or
backreferences, so a pattern using them is refused at declaration, as is one over 1,000
characters. RE2 is imported with the first pattern (about 10 ms), never by a schema without.
"""

from __future__ import annotations

import json
import operator
from decimal import Decimal
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import unquote

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SchemaError", "argument_errors", "check_tool_schema"]

MAX_PATTERN_CHARS = 1000  # a declared pattern's length
MAX_SCHEMA_DEPTH = 32  # nested sub-schemas, and same-value $ref hops, a declared schema may have
MAX_INSTANCE_DEPTH = 64  # nested arrays and objects an argument is checked to
_MAX_STEPS = 128  # nested schema evaluations on one path ($ref hops and anyOf branches count)
_BUDGET = 50_000  # schema evaluations per call: anyOf over $ref could otherwise blow up
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_KINDS: dict[type, str] = dict(
    zip((type(None), bool, int, float, str, list, dict), _TYPES, strict=True)
)
_SIZES = {str: ("minLength", "maxLength", "characters"), list: ("minItems", "maxItems", "items"),
          dict: ("minProperties", "maxProperties", "properties")}  # fmt: skip
_BOUNDS = (("minimum", ">=", operator.ge), ("exclusiveMinimum", ">", operator.gt),
           ("maximum", "<=", operator.le), ("exclusiveMaximum", "<", operator.lt))  # fmt: skip
#: keywords whose values hold sub-schemas by name (an object) or by position (a list)
_HOLDERS = {**dict.fromkeys(("properties", "patternProperties", "$defs", "definitions"), dict),
            **dict.fromkeys(("prefixItems", "allOf", "anyOf", "oneOf"), list)}  # fmt: skip

Path = tuple[str | int, ...]


class SchemaError(ValueError):
    """The schema itself is unusable (as opposed to arguments that break it)."""


def check_tool_schema(schema: object) -> dict[str, Any]:
    """The ``parameters`` of a declared tool: a JSON object whose "type", when present, is
    "object"; returned as is. SchemaError, with the place and the reason, for anything else: not
    an object, another type, a "properties" that is not an object, a "required" that is not a
    list of strings, an invalid pattern, nesting deeper than 32 levels, a "$ref" that is not a
    local "#/$defs/..." or "#/definitions/..." pointer that resolves, or a $ref cycle."""
    if not isinstance(schema, dict):
        raise SchemaError(f"must be a JSON object (a JSON Schema), got {_kind(schema)}")
    if "type" in schema and schema["type"] != "object":
        raise SchemaError(f"type: must be 'object', got {_show(schema['type'])}")
    refs: list[str] = []
    _check_node(schema, schema, (), 0, refs)
    done: set[str] = set()
    for ref in refs:
        _check_ref_chain(schema, {"$ref": ref}, (), done)
    return schema


def argument_errors(instance: object, schema: dict[str, Any], *, limit: int = 5) -> list[str]:
    """Where ``instance`` breaks ``schema``: at most ``limit`` messages like
    "order_id: expected integer, got string", "(root): missing required property 'city'" or
    "items.2: must be one of 'a', 'b'". Empty when it matches; never raises."""
    validator = _Validator(schema if isinstance(schema, dict) else {})
    return list(islice(validator.errors(instance, schema, (), 0), max(limit, 0)))


def _check_node(
    node: object, root: dict[str, Any], path: Path, depth: int, refs: list[str]
) -> None:
    """Walk every sub-schema; collect the $refs for ``_check_ref_chain``."""
    where = ".".join(map(str, path))
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise SchemaError(f"{_at(where)}a schema must be an object or a boolean, got {_kind(node)}")
    if depth > MAX_SCHEMA_DEPTH:
        raise SchemaError(f"{_at(where)}nested deeper than {MAX_SCHEMA_DEPTH} levels")
    names = [node["type"]] if isinstance(node.get("type"), str) else node.get("type", ["object"])
    if not (isinstance(names, list) and names and all(name in _TYPES for name in names)):
        raise SchemaError(
            f"{_at(where, 'type')}must be one of {', '.join(_TYPES)} or a list of them"
        )
    required = node.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise SchemaError(f"{_at(where, 'required')}must be a list of property names (strings)")
    if not isinstance(node.get("enum", []), list):
        raise SchemaError(f"{_at(where, 'enum')}must be a list of values")
    patterns = [("patternProperties", key) for key in _mapping(node.get("patternProperties"))]
    declared = [("pattern", node["pattern"])] if "pattern" in node else []
    for key, pattern in [*declared, *patterns]:
        if (problem := _pattern_problem(pattern)) is not None:
            raise SchemaError(f"{_at(where, key)}invalid pattern {_show(pattern)} ({problem})")
    if "$ref" in node:
        if not isinstance(ref := node["$ref"], str) or _resolve(root, ref) is None:
            raise SchemaError(
                f'{_at(where, "$ref")}must be a local "#/$defs/..." or "#/definitions/..."'
                f" pointer that resolves to a schema, got {_show(ref)}"
            )
        refs.append(ref)
    for key, kind in _HOLDERS.items():
        if not isinstance(subs := node.get(key, kind()), kind):
            wanted = "an object" if kind is dict else "a list"
            raise SchemaError(f"{_at(where, key)}must be {wanted}, got {_kind(subs)}")
        for name, sub in subs.items() if isinstance(subs, dict) else enumerate(subs):
            _check_node(sub, root, (*path, key, name), depth + 1, refs)
    for key in ("additionalProperties", "items", "not"):
        subs = node.get(key, True)
        for sub in subs if key == "items" and isinstance(subs, list) else [subs]:
            _check_node(sub, root, (*path, key), depth + 1, refs)


def _check_ref_chain(
    root: dict[str, Any], node: object, chain: tuple[str, ...], done: set[str], depth: int = 0
) -> None:
    """Follow what is checked against the same value: a $ref back to itself would loop forever."""
    if not isinstance(node, dict):
        return
    if depth > MAX_SCHEMA_DEPTH:
        raise SchemaError(f"$ref {chain[0]} nests deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(ref := node.get("$ref"), str) and ref not in done:
        if ref in chain:
            cycle = " -> ".join((*chain, ref))
            raise SchemaError(f"$ref cycle {cycle} never reaches a property or item")
        _check_ref_chain(root, _resolve(root, ref), (*chain, ref), done, depth + 1)
        done.add(ref)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in _listed(node.get(key)):
            _check_ref_chain(root, sub, chain, done, depth + 1)
    _check_ref_chain(root, node.get("not"), chain, done, depth + 1)


class _Validator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.budget = _BUDGET

    def errors(self, instance: object, schema: object, path: Path, steps: int) -> Iterator[str]:
        where = ".".join(map(str, path)) if path else "(root)"
        self.budget -= 1
        if schema is False:
            yield f"{where}: no value is allowed here"
        if not isinstance(schema, dict) or (instance is None and schema.get("nullable") is True):
            return
        if steps > _MAX_STEPS or self.budget < 0:
            yield f"{where}: too complex to check (a deep or cyclic schema, or a huge value)"
            return
        if isinstance(ref := schema.get("$ref"), str):
            yield from self.errors(instance, _resolve(self.root, ref), path, steps + 1)
        if (types := _types(schema)) and not any(_is(instance, name) for name in types):
            yield f"{where}: expected {' or '.join(types)}, got {_kind(instance)}"
            return
        yield from _value_errors(instance, schema, where)
        for sub in _listed(schema.get("allOf")):
            yield from self.errors(instance, sub, path, steps + 1)
        for keyword in ("anyOf", "oneOf"):
            if branches := _listed(schema.get(keyword)):
                firsts = [next(self.errors(instance, b, path, steps + 1), None) for b in branches]
                matched = [str(i) for i, first in enumerate(firsts, 1) if first is None]
                if not matched:
                    yield self._no_match(instance, where, branches, firsts)
                elif keyword == "oneOf" and len(matched) > 1:
                    options = ", ".join(matched)
                    yield f"{where}: must match exactly one alternative, matches {options}"
        negated = schema.get("not")
        if isinstance(negated, dict | bool) and not any(
            self.errors(instance, negated, path, steps + 1)
        ):
            yield f"{where}: must not match {_show(negated)}"
        children = list(_children(instance, schema, path))
        if children and len(path) >= MAX_INSTANCE_DEPTH:
            yield f"{where}: nested too deeply to check (over {MAX_INSTANCE_DEPTH} levels)"
            return
        for value, sub, sub_path in children:
            yield from self.errors(value, sub, sub_path, steps + 1)

    def _no_match(
        self, instance: object, where: str, branches: list[Any], firsts: list[Any]
    ) -> str:
        """One message for a failed anyOf/oneOf, told by type when the types are what failed."""
        declared = [self._branch_types(branch) for branch in branches]
        fits = [
            i
            for i, names in enumerate(declared)
            if names is None or any(_is(instance, name) for name in names)
        ]
        if len(fits) == 1:  # an optional enum, say: the one branch of the right type tells why
            return str(firsts[fits[0]])
        names = list(dict.fromkeys(name for names in declared for name in names or []))
        if not fits and names:
            return f"{where}: expected {' or '.join(names)}, got {_kind(instance)}"
        shown = "; ".join(f"option {i}: {_cut(first)}" for i, first in enumerate(firsts[:3], 1))
        more = "; ..." if len(firsts) > 3 else ""
        return f"{where}: matches none of the {len(branches)} alternatives ({shown}{more})"

    def _branch_types(self, branch: object) -> list[str] | None:
        """The types a branch allows, or None when it does not say."""
        if isinstance(branch, dict) and isinstance(ref := branch.get("$ref"), str):
            branch = _resolve(self.root, ref)
        if branch is False:
            return []
        return (_types(branch) or None) if isinstance(branch, dict) else None


def _value_errors(instance: object, schema: dict[str, Any], where: str) -> Iterator[str]:
    """The keywords that need no descent: enum, const, and the limits of each type."""
    enum = schema.get("enum")
    if isinstance(enum, list) and _key(instance) not in {_key(value) for value in enum}:
        more = ", ..." if len(enum) > 10 else ""
        yield f"{where}: must be one of {', '.join(map(_show, enum[:10]))}{more}"
    if "const" in schema and _key(instance) != _key(schema["const"]):
        yield f"{where}: must be {_show(schema['const'])}"
    for kind, (low, high, unit) in _SIZES.items():
        size = len(instance) if isinstance(instance, kind) else None
        if size is not None and _is_number(least := schema.get(low)) and size < least:
            yield f"{where}: expected at least {_show(least)} {unit}, got {size}"
        if size is not None and _is_number(most := schema.get(high)) and size > most:
            yield f"{where}: expected at most {_show(most)} {unit}, got {size}"
    if isinstance(instance, str):
        pattern = schema.get("pattern")
        if (
            isinstance(pattern, str)
            and (compiled := _compile(pattern))
            and not _search(compiled, instance)
        ):
            yield f"{where}: must match the pattern {_show(pattern)}"
    elif _is_number(instance):
        for keyword, sign, holds in _BOUNDS:
            if _is_number(bound := schema.get(keyword)) and not holds(instance, bound):
                yield f"{where}: must be {sign} {_show(bound)}"
        step = schema.get("multipleOf")
        if _is_number(step) and step > 0 and not _is_multiple(instance, step):
            yield f"{where}: must be a multiple of {_show(step)}"
    elif isinstance(instance, list):
        prefix, rest = _item_schemas(schema)
        if rest is False and len(instance) > len(prefix):
            yield f"{where}: expected at most {len(prefix)} items, got {len(instance)}"
        seen: dict[object, int] = {}
        for i, item in enumerate(instance if schema.get("uniqueItems") is True else []):
            if (first := seen.setdefault(_key(item), i)) != i:
                yield f"{where}: items must be unique (items {first} and {i} are equal)"
                break
    elif isinstance(instance, dict):
        for name in _listed(schema.get("required")):
            if isinstance(name, str) and name not in instance:
                yield f"{where}: missing required property {name!r}"
        if schema.get("additionalProperties") is False:
            declared = _mapping(schema.get("properties"))
            allowed = f" (allowed: {', '.join(map(repr, declared))})" if declared else ""
            for name in instance:
                if not _property_schemas(str(name), schema):
                    yield f"{where}: unexpected property {str(name)!r}{allowed}"


def _children(instance: object, schema: dict[str, Any], path: Path) -> Iterator[tuple[Any, ...]]:
    """The (value, sub-schema, path) to descend into. A false additionalProperties or items
    is left out: ``_value_errors`` reported it, once for the whole object or array."""
    if isinstance(instance, dict):
        extra = schema.get("additionalProperties")
        for name, value in instance.items():
            subs = _property_schemas(str(name), schema) or [None if extra is False else extra]
            yield from ((value, sub, (*path, str(name))) for sub in subs if _constrains(sub))
    elif isinstance(instance, list):
        prefix, rest = _item_schemas(schema)
        rest = None if rest is False else rest
        for i, item in enumerate(instance):
            if _constrains(sub := prefix[i] if i < len(prefix) else rest):
                yield item, sub, (*path, i)


def _constrains(schema: object) -> bool:
    return schema is False or isinstance(schema, dict)


def _property_schemas(name: str, schema: dict[str, Any]) -> list[object]:
    """The schemas a property's value must match: its own, and those of matching patterns."""
    properties = _mapping(schema.get("properties"))
    subs = [properties[name]] if name in properties else []
    for pattern, sub in _mapping(schema.get("patternProperties")).items():
        if (compiled := _compile(pattern)) and _search(compiled, name):
            subs.append(sub)
    return subs


def _item_schemas(schema: dict[str, Any]) -> tuple[list[Any], object]:
    """(prefixItems, items); an ``items`` list is the older tuple form of prefixItems."""
    rest = schema.get("items", True)
    return (rest, True) if isinstance(rest, list) else (_listed(schema.get("prefixItems")), rest)


def _resolve(root: dict[str, Any], ref: str) -> object:
    """The schema a local "#/$defs/..." or "#/definitions/..." pointer names, else None."""
    parts = [unquote(part).replace("~1", "/").replace("~0", "~") for part in ref[2:].split("/")]
    if not ref.startswith("#/") or len(parts) < 2 or parts[0] not in ("$defs", "definitions"):
        return None
    node: object = root
    for part in parts:
        index = int(part) if part.isascii() and part.isdigit() and len(part) < 10 else -1
        if isinstance(node, list) and 0 <= index < len(node):
            node = node[index]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node if isinstance(node, dict | bool) else None


def _pattern_problem(pattern: object) -> str | None:
    """Why a declared pattern cannot be used, or None when it can."""
    if not isinstance(pattern, str):
        return "a pattern is a string"
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS:,} characters"
    try:
        _re2().compile(pattern, _options())
    except UnicodeEncodeError:
        return "not valid Unicode text"
    except _re2().error as exc:  # RE2's own message, in bytes
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        return (
            f"{reason}; patterns run on a linear-time engine (RE2): no lookarounds, "
            "backreferences or repetition counts over 1000"
        )
    return None


@lru_cache(maxsize=256)
def _compile(pattern: str) -> Any:
    """The compiled pattern (an RE2 regexp), or None when it is not one (never an
    exception: declared patterns were checked, but a schema is data)."""
    if not isinstance(pattern, str) or _pattern_problem(pattern) is not None:
        return None
    return _re2().compile(pattern, _options())


def _search(compiled: Any, text: str) -> bool:
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate in the model's arguments: no match
        return False


@lru_cache(maxsize=1)
def _re2() -> Any:
    """RE2, imported with the first pattern: a schema without one never loads it."""
    import re2

    return re2


@lru_cache(maxsize=1)
def _options() -> Any:
    options = _re2().Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    return options


def _types(schema: dict[str, Any]) -> list[str]:
    names = [schema["type"]] if isinstance(schema.get("type"), str) else schema.get("type")
    known = [name for name in _listed(names) if name in _TYPES]
    return [*known, "null"] if known and schema.get("nullable") is True else known


def _is(value: object, name: str) -> bool:
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    if name == "number":
        return _is_number(value)
    return _kind(value) == name


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: object) -> str:
    """The JSON type of a value; a float is a number, even 3.0."""
    if (name := _KINDS.get(type(value))) is None:  # a subclass, or not JSON at all
        kinds = (name for kind, name in _KINDS.items() if isinstance(value, kind))
        name = next(kinds, type(value).__name__)
    return name


def _is_multiple(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    try:  # in decimal, so that 0.3 is a multiple of 0.1
        return Decimal(repr(value)) % Decimal(repr(step)) == 0
    except (ArithmeticError, ValueError):
        return False


def _key(value: object, depth: int = 0) -> object:
    """A hashable form in which equal JSON values are equal (1 == 1.0, but true != 1)."""
    if depth > MAX_INSTANCE_DEPTH or not isinstance(value, str | int | float | list | dict | None):
        return ("other", id(value))
    if isinstance(value, list):
        return ("array", tuple(_key(item, depth + 1) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _key(v, depth + 1)) for k, v in value.items()))
    return (_kind(value).replace("integer", "number"), value)


def _show(value: object) -> str:
    """A short rendering of a schema value for a message."""
    if isinstance(value, str):
        return repr(_cut(value, 60))
    try:
        return _cut(json.dumps(value, ensure_ascii=False, default=str), 60)
    except (TypeError, ValueError, RecursionError):
        return _kind(value)


def _cut(text: str, size: int = 150) -> str:
    return text if len(text) <= size else text[:size] + "..."


def _at(*parts: object) -> str:
    """A message's location: "properties.city.pattern: ", nothing at the root."""
    path = ".".join(str(part) for part in parts if part != "")
    return f"{path}: " if path else ""


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
