"""The JSON Schema subset that checks the arguments of caller-declared tools: each keyword,
messages with paths, the limit, local and recursive $refs, schemas refused when declared,
and the promise that no JSON value (and no crafted schema) makes the validator raise."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.json_schema import SchemaError, argument_errors, check_tool_schema

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
    "required": ["city"],
    "additionalProperties": False,
}
ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "integer"},
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "qty": {"type": "integer", "exclusiveMinimum": 0},
                    "price": {"type": "number", "multipleOf": 0.01},
                    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
                },
                "required": ["qty"],
            },
        },
        "note": {"type": ["string", "null"], "maxLength": 200},
    },
    "required": ["order_id", "lines"],
}
PYDANTIC = {  # what pydantic's model_json_schema() emits for Optional fields and nested models
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["street"],
        },
        "Unit": {"enum": ["c", "f"], "type": "string"},
    },
    "properties": {
        "home": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
        "unit": {"anyOf": [{"$ref": "#/$defs/Unit"}, {"type": "null"}]},
        "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Count"},
    },
}
TREE = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "properties": {"root": {"$ref": "#/$defs/node"}},
    "required": ["root"],
}
STRICT = {  # OpenAI structured-outputs style: everything required, null in the type list
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": ["integer", "null"]},
        "filters": {
            "type": "object",
            "properties": {"since": {"type": ["string", "null"], "format": "date"}},
            "required": ["since"],
            "additionalProperties": False,
        },
    },
    "required": ["query", "limit", "filters"],
    "additionalProperties": False,
}
REALISTIC = [WEATHER, ORDER, PYDANTIC, TREE, STRICT]
JSON_TYPES = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string",
              list: "array", dict: "object"}  # fmt: skip


def errors(instance: object, schema: dict[str, Any], **kwargs: Any) -> list[str]:
    return argument_errors(instance, check_tool_schema(schema), **kwargs)


def field(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool schema with one property ``x`` of the given schema."""
    return {"type": "object", "properties": {"x": schema}}


# ---- types ---------------------------------------------------------------------------------


def test_an_integer_field_refuses_a_string_and_a_boolean() -> None:
    schema = field({"type": "integer"})
    assert errors({"x": "3"}, schema) == ["x: expected integer, got string"]
    assert errors({"x": True}, schema) == ["x: expected integer, got boolean"]
    assert errors({"x": 3}, schema) == []


def test_an_integer_field_accepts_an_integral_float_but_not_a_fraction() -> None:
    schema = field({"type": "integer"})
    assert errors({"x": 3.0}, schema) == []
    assert errors({"x": 3.5}, schema) == ["x: expected integer, got number"]


def test_a_number_field_takes_integers_and_floats_but_never_a_boolean() -> None:
    schema = field({"type": "number"})
    assert errors({"x": 3}, schema) == errors({"x": -0.5}, schema) == []
    assert errors({"x": False}, schema) == ["x: expected number, got boolean"]


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "null"), (True, "boolean"), (1, "integer"), (1.5, "number"), ("s", "string"),
     ([], "array"), ({}, "object")],
)  # fmt: skip
def test_each_json_type_is_named_in_the_message(value: object, name: str) -> None:
    other = "string" if name != "string" else "null"
    assert errors({"x": value}, field({"type": other})) == [f"x: expected {other}, got {name}"]
    assert errors({"x": value}, field({"type": name})) == []


def test_a_list_of_types_accepts_each_and_names_them_all() -> None:
    schema = field({"type": ["string", "null"]})
    assert errors({"x": None}, schema) == errors({"x": "a"}, schema) == []
    assert errors({"x": 1}, schema) == ["x: expected string or null, got integer"]


def test_nullable_also_allows_null_openapi_style() -> None:
    schema = field({"type": "string", "nullable": True, "enum": ["a"]})
    assert errors({"x": None}, schema) == []
    assert errors({"x": 2}, schema) == ["x: expected string or null, got integer"]


# ---- enum and const ----------------------------------------------------------------------


def test_enum_lists_the_allowed_values() -> None:
    schema = {"type": "object", "properties": {"items": {"items": {"enum": ["a", "b"]}}}}
    assert errors({"items": ["a", "b", "c"]}, schema) == ["items.2: must be one of 'a', 'b'"]
    assert errors({"x": 3}, field({"enum": [1, None, True]}))[0] == (
        "x: must be one of 1, null, true"
    )


def test_a_long_enum_is_shown_shortened() -> None:
    (message,) = errors({"x": "z"}, field({"enum": [f"v{i}" for i in range(30)]}))
    assert message.startswith("x: must be one of 'v0', 'v1'") and message.endswith("'v9', ...")


def test_enum_and_const_compare_as_json_values() -> None:
    assert errors({"x": 1.0}, field({"enum": [1]})) == []
    assert errors({"x": True}, field({"enum": [1]})) == ["x: must be one of 1"]
    assert errors({"x": 1}, field({"const": True})) == ["x: must be true"]
    assert errors({"x": {"b": [1], "a": None}}, field({"const": {"a": None, "b": [1.0]}})) == []
    assert errors({"x": "on"}, field({"const": "off"})) == ["x: must be 'off'"]


# ---- objects -----------------------------------------------------------------------------


def test_a_missing_required_property_is_named_at_its_parent() -> None:
    assert errors({}, WEATHER) == ["(root): missing required property 'city'"]
    assert errors({"order_id": 1, "lines": [{}]}, ORDER) == [
        "lines.0: missing required property 'qty'"
    ]


def test_additional_properties_false_names_the_intruder_and_the_allowed_ones() -> None:
    assert errors({"city": "Oslo", "country": "NO"}, WEATHER) == [
        "(root): unexpected property 'country' (allowed: 'city', 'units', 'days')"
    ]


def test_additional_properties_as_a_schema_checks_only_undeclared_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    }
    assert errors({"id": 1, "a": "x", "b": "y"}, schema) == []
    assert errors({"id": 1, "a": 2}, schema) == ["a: expected string, got integer"]


def test_pattern_properties_check_matching_names_and_count_as_declared() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x_": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert errors({"x_1": 1, "x_2": 2}, schema) == []
    assert errors({"x_1": "a", "y": 1}, schema) == [
        "(root): unexpected property 'y'",
        "x_1: expected integer, got string",
    ]


def test_min_and_max_properties() -> None:
    schema = {"type": "object", "minProperties": 1, "maxProperties": 2}
    assert errors({}, schema) == ["(root): expected at least 1 properties, got 0"]
    assert errors({"a": 1, "b": 2, "c": 3}, schema) == [
        "(root): expected at most 2 properties, got 3"
    ]


# ---- arrays ------------------------------------------------------------------------------


def test_items_are_checked_with_their_index_in_the_path() -> None:
    args = {"order_id": 7, "lines": [{"qty": 1}, {"qty": 0}, {"qty": "2"}]}
    assert errors(args, ORDER) == [
        "lines.1.qty: must be > 0",
        "lines.2.qty: expected integer, got string",
    ]


def test_prefix_items_check_positions_and_items_false_forbids_more() -> None:
    schema = field({"prefixItems": [{"type": "number"}, {"type": "string"}], "items": False})
    assert errors({"x": [1.5, "a"]}, schema) == []
    assert errors({"x": [1.5, 2, "extra"]}, schema) == [
        "x: expected at most 2 items, got 3",
        "x.1: expected string, got integer",
    ]


def test_the_older_tuple_form_of_items_is_read_as_prefix_items() -> None:
    schema = field({"items": [{"type": "string"}, {"type": "integer"}]})
    assert errors({"x": ["a", 1, None]}, schema) == []
    assert errors({"x": [1]}, schema) == ["x.0: expected string, got integer"]


def test_min_and_max_items() -> None:
    schema = field({"type": "array", "minItems": 2, "maxItems": 3})
    assert errors({"x": [1]}, schema) == ["x: expected at least 2 items, got 1"]
    assert errors({"x": [1, 2, 3, 4]}, schema) == ["x: expected at most 3 items, got 4"]
    assert errors({"x": [1, 2]}, schema) == []


def test_unique_items_compares_as_json_values() -> None:
    schema = field({"uniqueItems": True})
    assert errors({"x": [1, 2, 1.0]}, schema) == [
        "x: items must be unique (items 0 and 2 are equal)"
    ]
    assert errors({"x": [1, True, "1", [1], {"a": 1}]}, schema) == []
    assert errors({"x": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}, schema) != []


# ---- strings -----------------------------------------------------------------------------


def test_string_length_counts_code_points() -> None:
    schema = field({"minLength": 2, "maxLength": 4})
    assert errors({"x": "héllo"}, schema) == ["x: expected at most 4 characters, got 5"]
    assert errors({"x": "👍🏽"}, schema) == []  # two code points
    assert errors({"x": "👍"}, schema) == ["x: expected at least 2 characters, got 1"]


def test_pattern_is_searched_not_anchored() -> None:
    assert errors({"x": "say hello"}, field({"pattern": "hel+o"})) == []
    assert errors({"sku": "abc-1234"}, {**ORDER, "required": []}) == [
        "sku: must match the pattern '^[A-Z]{3}-[0-9]{4}$'"
    ]


# ---- numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "bound", "good", "bad", "message"),
    [
        ("minimum", 1, 1, 0.5, "x: must be >= 1"),
        ("exclusiveMinimum", 1, 1.01, 1, "x: must be > 1"),
        ("maximum", 10, 10, 10.5, "x: must be <= 10"),
        ("exclusiveMaximum", 10, 9, 10.0, "x: must be < 10"),
    ],
)
def test_numeric_bounds(keyword: str, bound: int, good: float, bad: float, message: str) -> None:
    schema = field({"type": "number", keyword: bound})
    assert errors({"x": good}, schema) == []
    assert errors({"x": bad}, schema) == [message]


def test_multiple_of_works_with_decimal_fractions() -> None:
    schema = field({"multipleOf": 0.01})
    assert errors({"x": 19.99}, schema) == errors({"x": 20}, schema) == []
    assert errors({"x": 0.3}, field({"multipleOf": 0.1})) == []
    assert errors({"x": 19.995}, schema) == ["x: must be a multiple of 0.01"]
    assert errors({"x": 7}, field({"multipleOf": 2})) == ["x: must be a multiple of 2"]


def test_non_finite_and_huge_numbers_give_messages_not_exceptions() -> None:
    schema = field({"minimum": 0, "maximum": 10, "multipleOf": 0.5})
    assert errors({"x": math.nan}, schema) == [
        "x: must be >= 0",
        "x: must be <= 10",
        "x: must be a multiple of 0.5",
    ]
    assert errors({"x": math.inf}, schema) == ["x: must be <= 10", "x: must be a multiple of 0.5"]
    assert errors({"x": 10**5000}, schema) == ["x: must be <= 10", "x: must be a multiple of 0.5"]
    assert errors({"x": 10**5000}, field({"multipleOf": 5})) == []


# ---- combinators -------------------------------------------------------------------------


def test_any_of_over_types_says_which_types_were_expected() -> None:
    schema = field({"anyOf": [{"type": "string"}, {"type": "array"}]})
    assert errors({"x": ["a"]}, schema) == []
    assert errors({"x": 5}, schema) == ["x: expected string or array, got integer"]


def test_an_optional_enum_reports_the_enum_not_the_alternatives() -> None:
    assert errors({"unit": None, "count": None}, PYDANTIC) == []
    assert errors({"unit": "k"}, PYDANTIC) == ["unit: must be one of 'c', 'f'"]
    assert errors({"count": "3"}, PYDANTIC) == ["count: expected integer or null, got string"]
    assert errors({"home": {"zip": "0150"}}, PYDANTIC) == [
        "home: missing required property 'street'"
    ]


def test_any_of_with_several_fitting_branches_lists_what_each_needed() -> None:
    schema = field({"anyOf": [{"type": "string", "minLength": 5}, {"pattern": "^[0-9]+$"}]})
    assert errors({"x": "12"}, schema) == []
    assert errors({"x": "ab"}, schema) == [
        "x: matches none of the 2 alternatives (option 1: x: expected at least 5 characters,"
        " got 2; option 2: x: must match the pattern '^[0-9]+$')"
    ]


def test_one_of_wants_exactly_one_match() -> None:
    schema = field({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    assert errors({"x": 1.5}, schema) == []
    assert errors({"x": 1}, schema) == ["x: must match exactly one alternative, matches 1, 2"]
    assert errors({"x": "1"}, schema) == ["x: expected integer or number, got string"]


def test_all_of_reports_every_branch_that_fails() -> None:
    schema = field({"allOf": [{"minLength": 3}, {"pattern": "^a"}]})
    assert errors({"x": "abc"}, schema) == []
    assert errors({"x": "b"}, schema) == [
        "x: expected at least 3 characters, got 1",
        "x: must match the pattern '^a'",
    ]


def test_not_refuses_what_matches() -> None:
    schema = field({"not": {"type": "null"}})
    assert errors({"x": 0}, schema) == []
    assert errors({"x": None}, schema) == ['x: must not match {"type": "null"}']


def test_boolean_sub_schemas() -> None:
    schema = {"type": "object", "properties": {"any": True, "never": False}}
    assert errors({"any": [1, {"b": None}]}, schema) == []
    assert errors({"never": 1}, schema) == ["never: no value is allowed here"]


# ---- $ref --------------------------------------------------------------------------------


@pytest.mark.parametrize("defs", ["$defs", "definitions"])
def test_a_local_ref_is_followed(defs: str) -> None:
    schema = {
        "type": "object",
        defs: {"when": {"type": "string", "pattern": "^[0-9]{4}-"}},
        "properties": {"start": {"$ref": f"#/{defs}/when"}},
    }
    assert errors({"start": "2024-05-01"}, schema) == []
    assert errors({"start": "May 1"}, schema) == ["start: must match the pattern '^[0-9]{4}-'"]


def test_a_ref_pointer_is_unescaped() -> None:
    schema = {
        "type": "object",
        "$defs": {"a/b": {"type": "integer"}, "c~d e": {"type": "string"}},
        "properties": {"x": {"$ref": "#/$defs/a~1b"}, "y": {"$ref": "#/$defs/c~0d%20e"}},
    }
    assert errors({"x": "1", "y": 2}, schema) == [
        "x: expected integer, got string",
        "y: expected string, got integer",
    ]


def test_a_recursive_ref_checks_the_whole_tree_with_paths() -> None:
    tree = {"root": {"name": "a", "children": [{"name": "b"}, {"children": [{"name": 3}]}]}}
    assert errors(tree, TREE) == [
        "root.children.1: missing required property 'name'",
        "root.children.1.children.0.name: expected string, got integer",
    ]


# ---- messages and the limit --------------------------------------------------------------


def test_matching_arguments_give_no_messages() -> None:
    args = {
        "order_id": 12,
        "sku": "ABC-1234",
        "lines": [{"qty": 2, "price": 9.99, "tags": ["a", "b"]}],
        "note": None,
    }
    assert errors(args, ORDER) == []
    strict = {"query": "q", "limit": None, "filters": {"since": "2024-01-01"}}
    assert errors(strict, STRICT) == []


def test_the_limit_caps_the_messages() -> None:
    args = {"x": list(range(100))}
    schema = field({"items": {"type": "string"}})
    assert len(errors(args, schema)) == 5
    assert errors(args, schema, limit=2) == [
        "x.0: expected string, got integer",
        "x.1: expected string, got integer",
    ]
    assert errors(args, schema, limit=0) == errors(args, schema, limit=-3) == []


def test_a_type_mismatch_is_the_only_message_for_that_value() -> None:
    assert errors({"x": 5}, field({"type": "string", "minLength": 9, "pattern": "a"})) == [
        "x: expected string, got integer"
    ]


def test_unknown_keywords_and_format_are_ignored() -> None:
    schema = field({"type": "string", "format": "email", "x-vendor": {"a": 1}, "examples": [1]})
    assert errors({"x": "not an email"}, schema) == []


# ---- pathological input ------------------------------------------------------------------


def nested_list(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def test_a_deeply_nested_value_ends_in_a_message_not_a_recursion_error() -> None:
    schema = {
        "type": "object",
        "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "uniqueItems": True}},
        "properties": {"x": {"$ref": "#/$defs/a", "enum": [[[1]]], "const": [[]]}},
    }
    deep, enum, const = errors({"x": nested_list(100_000)}, schema)
    assert deep == f"x{'.0' * 63}: nested too deeply to check (over 64 levels)"
    assert (enum, const) == ("x: must be one of [[1]]", "x: must be [[]]")
    messages = errors(
        {"x": nested_list(100_000)}, {**schema, "properties": {"x": schema["$defs"]["a"]}}
    )
    assert messages == [f"x{'.0' * 63}: nested too deeply to check (over 64 levels)"]


def test_a_value_nested_within_the_limit_is_checked_in_full() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
              "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}}}}  # fmt: skip
    assert errors({"x": nested_list(60)}, schema) == []


def test_a_cyclic_or_deep_unchecked_schema_ends_in_a_message() -> None:
    cyclic = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    assert argument_errors(1, cyclic) == [
        "(root): too complex to check (a deep or cyclic schema, or a huge value)"
    ]
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"anyOf": [deep, {"type": "string"}], "not": deep}
    assert len(argument_errors(1, deep)) == 1


def test_alternatives_that_multiply_end_in_one_short_message() -> None:
    # each level doubles the work: 2**25 evaluations without the budget, a huge message without cuts
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(25)
    }
    defs["d25"] = {"type": "string"}
    schema = {"$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
    assert argument_errors({"x": "fine"}, schema) == []
    (message,) = argument_errors({"x": 1}, schema)
    assert message.startswith("x: matches none of the 2 alternatives") and len(message) < 1000


def test_an_unchecked_schema_with_broken_keywords_is_read_permissively() -> None:
    broken = {
        "type": "object",
        "properties": {"x": {"pattern": "[", "type": "strung", "enum": "abc", "minimum": "3"}},
        "required": "x",
        "patternProperties": {"(": {"type": "integer"}},
        "additionalProperties": "no",
        "anyOf": {"type": "string"},
        "$ref": "#/$defs/missing",
    }
    assert argument_errors({"x": "y", "z": 1}, broken) == []


# ---- check_tool_schema -------------------------------------------------------------------


def test_a_usable_schema_is_returned_as_is() -> None:
    for schema in [*REALISTIC, {}, {"properties": {}}, {"type": "object"}]:
        assert check_tool_schema(schema) is schema


def test_schema_error_is_a_value_error() -> None:
    assert issubclass(SchemaError, ValueError)


X = "properties.x"
REFUSED = [
    ([], "must be a JSON object (a JSON Schema), got array"),
    ("{}", "must be a JSON object (a JSON Schema), got string"),
    ({"type": "string"}, "type: must be 'object', got 'string'"),
    ({"type": ["object", "null"]}, 'type: must be \'object\', got ["object", "null"]'),
    ({"properties": []}, "properties: must be an object, got array"),
    ({"required": "city"}, "required: must be a list of property names (strings)"),
    ({"required": ["a", 1]}, "required: must be a list of property names (strings)"),
    (field({"type": "str"}), f"{X}.type: must be one of null, boolean, integer, number, string,"),
    (field("string"), f"{X}: a schema must be an object or a boolean, got string"),
    (field({"enum": "ab"}), f"{X}.enum: must be a list of values"),
    (field({"anyOf": {}}), f"{X}.anyOf: must be a list, got object"),
    (field({"items": {"required": [{}]}}), f"{X}.items.required: must be a list of property"),
    (field({"pattern": "[a-"}), f"{X}.pattern: invalid pattern '[a-' (missing ]"),
    ({"patternProperties": {"(": {}}}, "patternProperties: invalid pattern '(' (missing )"),
    (field({"pattern": "(?=a)b"}), f"{X}.pattern: invalid pattern '(?=a)b' (invalid perl operator"),
    (field({"pattern": r"(a)\1"}), f"{X}.pattern: invalid pattern '(a)\\\\1' (invalid escape"),
    (field({"pattern": "a" * 1001}), f"{X}.pattern: invalid pattern 'aaaa"),
    (field({"pattern": 7}), f"{X}.pattern: invalid pattern 7 (a pattern is a string)"),
    (field({"$ref": "#/$defs/none"}), f'{X}.$ref: must be a local "#/$defs/..." or "#/definitions'),
    (field({"$ref": "https://example.com/s.json"}), f"{X}.$ref: must be a local"),
    (field({"$ref": "#/properties"}), f"{X}.$ref: must be a local"),
    (field({"$ref": "#"}), f"{X}.$ref: must be a local"),
    ({"$defs": {"a": 1}}, "$defs.a: a schema must be an object or a boolean, got integer"),
    (
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}},
        "$ref cycle #/$defs/b -> #/$defs/a -> #/$defs/b never reaches a property",
    ),
]


@pytest.mark.parametrize(("schema", "message"), REFUSED)
def test_an_unusable_schema_is_refused_with_a_clear_message(schema: object, message: str) -> None:
    with pytest.raises(SchemaError) as refused:
        check_tool_schema(schema)
    assert str(refused.value).startswith(message)


def nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def test_a_schema_nested_deeper_than_32_levels_is_refused() -> None:
    assert check_tool_schema(nested_schema(32))
    with pytest.raises(SchemaError, match="nested deeper than 32 levels"):
        check_tool_schema(nested_schema(33))


def test_a_recursive_ref_through_a_property_is_accepted_but_a_bare_cycle_is_not() -> None:
    assert check_tool_schema(TREE) is TREE
    with pytest.raises(SchemaError, match=r"\$ref cycle #/\$defs/a -> #/\$defs/a"):
        check_tool_schema({"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}})


def test_a_long_ref_chain_is_refused_not_a_recursion_error() -> None:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(2000)}
    defs["d2000"] = {"type": "string"}
    with pytest.raises(SchemaError, match=r"\$ref #/\$defs/d1 nests deeper than 32 levels"):
        check_tool_schema({"$defs": defs})


# ---- properties over random input --------------------------------------------------------

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
NAMES = [
    "city", "units", "days", "order_id", "sku", "lines", "qty", "price", "tags", "note", "home",
    "unit", "count", "street", "root", "name", "children", "query", "limit", "filters", "since",
]  # fmt: skip
KEYWORDS = [
    "type", "enum", "const", "properties", "required", "additionalProperties",
    "patternProperties", "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
    "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minProperties", "maxProperties", "anyOf", "oneOf",
    "allOf", "not", "nullable", "$ref", "$defs",
]  # fmt: skip
SCHEMA_WORDS = [
    "string", "integer", "number", "object", "array", "null", "[", "^a", "(", "#/$defs/a",
    "#/$defs/b", "#", 0, 0.1, -1, 3,
]  # fmt: skip

# floats include NaN and the infinities: json.loads accepts them
json_values = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
# objects keyed by the schemas' own property names, so that values are checked in depth
shaped = st.recursive(
    json_values,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=5)
    ),
    max_leaves=40,
)
# anything schema-shaped, sound or not: what a schema that skipped check_tool_schema could be
schema_values = json_values | st.sampled_from(SCHEMA_WORDS)
random_schemas = st.recursive(
    st.booleans() | st.dictionaries(st.sampled_from(KEYWORDS), schema_values, max_size=4),
    lambda inner: st.dictionaries(
        st.sampled_from(KEYWORDS),
        schema_values
        | inner
        | st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "x", "^x"]), inner, max_size=3),
        max_size=5,
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(json_values, shaped), schema=st.sampled_from(REALISTIC))
def test_random_json_values_never_break_the_validator(
    value: object, schema: dict[str, Any]
) -> None:
    messages = argument_errors(value, schema)
    assert isinstance(messages, list) and len(messages) <= 5
    assert all(isinstance(m, str) and m for m in messages)
    if not isinstance(value, dict):  # every one of them wants an object
        assert messages == [f"(root): expected object, got {JSON_TYPES[type(value)]}"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, schema=random_schemas)
def test_random_schemas_never_break_the_validator_or_the_check(
    value: object, schema: object
) -> None:
    with contextlib.suppress(SchemaError):  # anything else would fail the test
        check_tool_schema(schema)
    if isinstance(schema, dict):
        messages = argument_errors(value, schema, limit=3)
        assert len(messages) <= 3 and all(isinstance(m, str) for m in messages)


def test_a_catastrophic_backtracking_pattern_runs_in_linear_time() -> None:
    import time

    schema = field({"type": "string", "pattern": "(a+)+$"})
    refused = ["x: must match the pattern '(a+)+$'"]
    started = time.perf_counter()
    assert errors({"x": "a" * 24 + "!"}, schema) == refused  # Python's re: 8.5 s here
    assert errors({"x": "a" * 200_000 + "!"}, schema) == refused
    assert errors({"x": "a" * 200_000 + "!"}, field({"pattern": "^(a|aa)+$"})) != []
    assert errors({"x": "baaa"}, schema) == []
    assert time.perf_counter() - started < 0.5


def test_a_lone_surrogate_in_an_argument_fails_its_pattern_without_raising() -> None:
    assert errors({"x": "\ud800"}, field({"pattern": "^a"})) == ["x: must match the pattern '^a'"]
    schema = {"type": "object", "patternProperties": {"^a": {"type": "integer"}}}
    assert errors({"\ud800": "not checked by the pattern"}, schema) == []


def test_the_pattern_engine_is_imported_only_by_a_schema_with_a_pattern() -> None:
    import os
    import subprocess
    import sys

    probe = (
        "import sys; from agent_harness.json_schema import argument_errors as a, "
        "check_tool_schema as c; a({'x': 'y'}, c({'properties': {'x': {'type': 'string'}}})); "
        "print('re2' in sys.modules); c({'properties': {'x': {'pattern': 'y'}}}); "
        "print('re2' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False", "True"]
