"""A small deterministic instance of a JSON schema: what the offline model answers when a
format is asked, and the arguments it gives a forced tool call it cannot fill otherwise.

Required properties only (strict schemas list them all); strings are ``text`` (clipped
to ``maxLength``; empty for a ``format``), numbers their minimum or 0, arrays
``minItems`` copies of their item, enums and consts their first value, the first branch
of an ``anyOf``; local ``$ref`` (``#/$defs/...``) is followed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["minimal_instance"]

_MAX_DEPTH = 16


def minimal_instance(schema: object, text: str = "") -> Any:
    root = schema if isinstance(schema, dict) else {}
    return _instance(root, root, text, 0)


def _instance(schema: dict[str, Any], root: dict[str, Any], text: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return _instance(node if isinstance(node, dict) else {}, root, text, depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches and isinstance(branches[0], dict):
            return _instance(branches[0], root, text, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        names = required if isinstance(required, list) else []
        return {
            name: _instance(_dict(properties.get(name)), root, text, depth + 1)
            for name in names
            if isinstance(name, str)
        }
    if kind == "array":
        count = schema.get("minItems", 0)
        item = _instance(_dict(schema.get("items")), root, text, depth + 1)
        return [item] * (count if isinstance(count, int) else 0)
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low if isinstance(low, (int, float)) else 0
        if "exclusiveMinimum" in schema and "minimum" not in schema:
            value += 1
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    limit = schema.get("maxLength")
    value_text = text if "format" not in schema else ""
    return value_text[:limit] if isinstance(limit, int) else value_text


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
