"""The answers of the OpenAI-shaped routes, as pydantic models: the model list, chat
completions, responses, and the Conversations API's conversations and items.

OpenAI's objects as this API fills them, field names as it answers; fields it adds
later are kept (``model_extra``). ``item.model_dump(mode="json", exclude_unset=True)``
gives an item back as the API sent it (what the OpenAI Agents SDK's sessions hold).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatAnswerMessage",
    "ChatChoice",
    "ChatCompletion",
    "ChatFunctionCall",
    "ChatToolCall",
    "CompletionUsage",
    "ContentPart",
    "Conversation",
    "ConversationDeleted",
    "ConversationItem",
    "ConversationItemList",
    "ConversationRef",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "MessageItem",
    "ModelCard",
    "ModelList",
    "ResponseDeleted",
    "ResponseObject",
    "ResponseUsage",
]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class ModelCard(_Answer):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(_Answer):
    object: Literal["list"]
    data: list[ModelCard]


# -- chat completions -------------------------------------------------------------------------
class ChatFunctionCall(_Answer):
    name: str
    arguments: str


class ChatToolCall(_Answer):
    id: str
    type: Literal["function"]
    function: ChatFunctionCall


class ChatAnswerMessage(_Answer):
    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ChatToolCall] | None = None


class ChatChoice(_Answer):
    index: int
    message: ChatAnswerMessage
    finish_reason: Literal["stop", "tool_calls"]
    logprobs: None


class CompletionUsage(_Answer):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(_Answer):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: CompletionUsage
    system_fingerprint: str | None


# -- items: of a conversation, and a response's output ----------------------------------------
class ContentPart(_Answer):
    """``input_text`` (a user's) or ``output_text`` (the assistant's, with annotations)."""

    type: Literal["input_text", "output_text"]
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class MessageItem(_Answer):
    type: Literal["message"]
    id: str
    status: str
    role: Literal["user", "assistant"]
    content: list[ContentPart]


class FunctionCallItem(_Answer):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: str


class FunctionCallOutputItem(_Answer):
    type: Literal["function_call_output"]
    id: str
    call_id: str
    output: str
    status: str


#: an item of a conversation (or of a response's output), by its ``type``
ConversationItem = Annotated[
    MessageItem | FunctionCallItem | FunctionCallOutputItem, Field(discriminator="type")
]


class ConversationItemList(_Answer):
    object: Literal["list"]
    data: list[ConversationItem]
    first_id: str | None
    last_id: str | None
    has_more: bool


class Conversation(_Answer):
    id: str
    object: Literal["conversation"]
    created_at: int
    metadata: dict[str, str]


class ConversationDeleted(_Answer):
    id: str
    object: Literal["conversation.deleted"]
    deleted: bool


# -- responses --------------------------------------------------------------------------------
class ResponseUsage(_Answer):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class ConversationRef(_Answer):
    id: str


class ResponseObject(_Answer):
    """A response (``POST /v1/responses``, ``GET /v1/responses/{id}``)."""

    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["completed", "in_progress"]
    background: bool
    error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    instructions: str | None
    max_output_tokens: int | None
    metadata: dict[str, str]
    model: str
    conversation: ConversationRef | None
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: dict[str, Any]
    store: bool
    temperature: float
    text: dict[str, Any]
    tool_choice: Any
    tools: list[Any]
    top_p: float
    truncation: str
    user: str | None
    output: list[Annotated[MessageItem | FunctionCallItem, Field(discriminator="type")]]
    usage: ResponseUsage | None


class ResponseDeleted(_Answer):
    id: str
    object: Literal["response"]
    deleted: bool
