"""What the OpenAPI document (api.openapi) is built of: JSON content, the error
responses every operation may answer, and the components registry that turns pydantic
models (request bodies from api.schemas and the routes, answers from api.answers and
api.openai_answers) into ``#/components/schemas`` and ``$ref``s to them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter

__all__ = ["ERRORS", "Components", "answer", "json_content", "op"]

REF = "#/components/schemas/{model}"

#: the error answers, by status: each a ``$ref`` to a response of the components
ERRORS = {
    str(code): {"$ref": f"#/components/responses/{name}"}
    for code, name in (
        (400, "BadRequest"),
        (401, "Unauthorized"),
        (404, "NotFound"),
        (409, "Conflict"),
        (412, "PreconditionFailed"),
        (413, "TooLarge"),
        (422, "Invalid"),
        (428, "PreconditionRequired"),
        (429, "RateLimited"),
        (502, "ModelFailed"),
        (503, "StoreUnavailable"),
        (504, "ModelTimeout"),
    )
}

#: ``{"error": {"code", "message", "details"?}}``; the OpenAI-shaped routes' error object
#: has the same two fields, with ``type`` and ``param``
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
            },
        }
    },
}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def answer(description: str, schema: dict[str, Any] | None, *statuses: str) -> dict[str, Any]:
    """An operation's answers: ``schema`` (None: no body) under each of ``statuses``
    (default 200), and the errors."""
    body = {"description": description} | (json_content(schema) if schema is not None else {})
    return dict.fromkeys(statuses or ("200",), body) | ERRORS


def op(summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": responses} | extra


class Components:
    """The schemas the document's operations refer to, gathered as they are named."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def _add(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        for one, found in {**schema.pop("$defs", {}), name: schema}.items():
            if self.schemas.setdefault(one, found) != found:
                raise ValueError(f"two different schemas named {one}")
        return {"$ref": REF.format(model=name)}

    def ref(self, model: type[BaseModel]) -> dict[str, Any]:
        """``model``'s schema (and those it uses) among the components; a $ref to it."""
        return self._add(model.__name__, model.model_json_schema(ref_template=REF))

    def named(self, name: str, adapter: TypeAdapter[Any]) -> dict[str, Any]:
        """A type that is no model (a union of them) as the component ``name``."""
        return self._add(name, adapter.json_schema(ref_template=REF))

    def body(self, model: type[BaseModel]) -> dict[str, Any]:
        return {"required": True} | json_content(self.ref(model))

    def ok(self, description: str, model: type[BaseModel], *statuses: str) -> dict[str, Any]:
        return answer(description, self.ref(model), *statuses)

    def streamed(self, description: str, model: type[BaseModel]) -> dict[str, Any]:
        """JSON, or with ``stream: true`` server-sent events (buffered in one answer)."""
        answers = self.ok(description, model)
        events = {"text/event-stream": {"schema": {"type": "string"}}}
        answers["200"] = answers["200"] | {"content": answers["200"]["content"] | events}
        return answers

    def document(self) -> dict[str, Any]:
        """The ``components`` of the document: schemas, error responses, security."""
        responses = {
            name: {"description": name} | json_content({"$ref": REF.format(model="Error")})
            for name in {ref["$ref"].rsplit("/", 1)[-1] for ref in ERRORS.values()}
        }
        return {
            "schemas": self.schemas | {"Error": _ERROR},
            "responses": responses,
            "securitySchemes": {
                "jwt": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "devUser": {"type": "apiKey", "in": "header", "name": "X-User-Id"},
            },
        }
