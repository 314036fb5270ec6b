"""The typed client (clients/python) against the API's OpenAPI document: every route of
the document has a client method (sync and async), and every schema an answer uses is a
model of the client with the same fields, required where the schema requires them.

With tests/unit/test_client_answers.py (every answer of the real routes parses into the
client's models with no field left over) this ties the three together: what the routes
answer, what the document says they answer (api/answers.py), what the client reads."""

from __future__ import annotations

from functools import cache
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from agent_harness_client import AgentHarness, AsyncAgentHarness
from agent_harness_client import models as client_models
from agent_harness_client import openai_types as client_openai_types
from agent_harness_client._endpoints import ENDPOINTS
from tests.unit.test_client_answers import app_transport
from tests.unit.test_routes import dev_runtime

#: routes of the document the client leaves to other clients, and why
NOT_THE_CLIENTS = {
    ("/mcp", "post"): "the MCP server: an MCP client speaks JSON-RPC to it",
    ("/mcp", "get"): "405: no server stream",
    ("/mcp", "delete"): "405: no session to end",
}
METHODS = ("get", "put", "post", "delete", "patch")


@cache
def openapi_document() -> dict[str, Any]:
    """The document as the API serves it (``GET /v1/openapi.json``), read by the client."""
    http = httpx.Client(transport=app_transport(dev_runtime()))
    with AgentHarness("http://stack", http_client=http) as client:
        return client.openapi()


def document_routes() -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method in METHODS
    }


def client_models_by_name() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for module in (client_models, client_openai_types):
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel:
                found.setdefault(value.__name__, value)
    return found


def answer_schema(path: str, method: str) -> dict[str, Any] | None:
    """The JSON schema of the route's success answer (None: it has no body)."""
    responses = openapi_document()["paths"][path][method]["responses"]
    success = [code for code in responses if code.startswith("2")]
    assert success, f"{method.upper()} {path} documents no success answer"
    schemas = {
        str(responses[code].get("content", {}).get("application/json", {}).get("schema"))
        for code in success
    }
    assert len(schemas) == 1, f"{method.upper()} {path}: its success answers differ"
    content = responses[success[0]].get("content", {}).get("application/json")
    return None if content is None else content["schema"]


def refs_in(schema: Any) -> set[str]:
    """The component names a schema refers to, anywhere in it."""
    if isinstance(schema, dict):
        found = set()
        if isinstance(schema.get("$ref"), str):
            found.add(schema["$ref"].rsplit("/", 1)[-1])
        for value in schema.values():
            found |= refs_in(value)
        return found
    if isinstance(schema, list):
        return set().union(*(refs_in(v) for v in schema)) if schema else set()
    return set()


def reachable(names: set[str]) -> set[str]:
    """Those components and every component they refer to, transitively."""
    components = openapi_document()["components"]["schemas"]
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(refs_in(components[name]) - seen)
    return seen


def client_method(client: object, dotted: str) -> Any:
    target = client
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def test_every_route_of_the_document_has_a_client_method() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    sync = AgentHarness("http://stack", http_client=httpx.Client(transport=transport))
    asynchronous = AsyncAgentHarness(
        "http://stack", http_client=httpx.AsyncClient(transport=transport)
    )
    served = {(e.path, e.method.lower()): e for e in ENDPOINTS}
    missing = sorted(document_routes() - set(served) - set(NOT_THE_CLIENTS))
    assert not missing, f"routes of the document without a client method: {missing}"
    unknown = sorted(set(served) - document_routes())
    assert not unknown, f"client endpoints the document does not have: {unknown}"
    for endpoint in served.values():
        assert callable(client_method(sync, endpoint.client_method)), endpoint
        assert callable(client_method(asynchronous, endpoint.client_method)), endpoint


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method} {e.path}")
def test_each_endpoint_reads_the_answer_the_document_names(endpoint: Any) -> None:
    schema = answer_schema(endpoint.path, endpoint.method.lower())
    if endpoint.answer is None:
        assert schema is None, "the document says this route answers a body"
        return
    assert schema is not None, "the document says this route answers no body"
    if "$ref" not in schema:  # the OpenAPI document itself: any object
        assert schema == {"type": "object"} and endpoint.answer == dict[str, Any]
        return
    expected = endpoint.schema or endpoint.answer.__name__
    assert schema["$ref"].rsplit("/", 1)[-1] == expected


def answer_components() -> list[str]:
    named = {
        ref
        for path, method in document_routes() - set(NOT_THE_CLIENTS)
        for ref in refs_in(answer_schema(path, method))
    }
    return sorted(reachable(named))


def test_the_answers_use_the_models_of_the_client() -> None:
    names = answer_components()
    assert len(names) > 60  # every answer, and the models in them
    models = client_models_by_name()
    components = openapi_document()["components"]["schemas"]
    unions = [n for n in names if "properties" not in components[n]]
    assert unions == ["ConversationItem"]  # a union of models, which are compared
    missing = [n for n in names if n not in unions and n not in models]
    assert not missing, f"answer schemas without a client model of that name: {missing}"


@pytest.mark.parametrize("name", answer_components())
def test_each_answer_schema_has_the_fields_of_its_client_model(name: str) -> None:
    schema = openapi_document()["components"]["schemas"][name]
    if "properties" not in schema:
        return  # a union: its members are compared
    model = client_models_by_name()[name]
    fields = {f.alias or n: f for n, f in model.model_fields.items()}
    assert set(fields) == set(schema["properties"]), name
    required = {n for n, f in fields.items() if f.is_required()}
    assert required == set(schema.get("required", [])), name
    extra = model.model_config.get("extra")
    assert extra in ("allow", "ignore", None), f"{name}: unknown fields must not break it"
