"""Compaction: keep the working context bounded by replacing its older part with a summary.

    context (summary + messages) + the new message
      trigger?  messages >= trigger_messages (50; 0 = off)
                or tokens >= trigger_tokens (0 = the model's window minus a reserve)
      keep      the newest keep_messages (20), or the newest keep_tokens (-1 = dynamic
                from the window, 0 = count messages, > 0 a fixed budget)
      cut       never between an assistant's tool calls and their results (safe cutoff)
      summary   the compaction model summarises earlier summary + the cut-off messages,
                so summaries chain; a failed summary skips compaction, never the turn
      after     the turn's post-turn job becomes a "compaction" flush of every
                unflushed turn (the thread log keeps the raw messages: nothing is lost)

Runs at the start of a turn, and forced (keep_messages, no trigger) when the provider
reports a context overflow. Tool-call arguments older than the newest keep_messages are
shortened every turn (truncate_args), so a long argument is not re-sent forever. Token
counts use the real tokenizer, not a length heuristic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from agent_harness import markup
from agent_harness.errors import ModelError
from agent_harness.memory.jobs.prompts import render_messages, render_template
from agent_harness.models.base import ChatRequest, Message, ToolCall, Usage
from agent_harness.models.windows import context_window

if TYPE_CHECKING:
    from agent_harness.models.base import ChatModel
    from agent_harness.records import WorkingContext
    from agent_harness.runtime import Runtime
    from agent_harness.settings import Settings

__all__ = [
    "SUMMARY_PROMPT",
    "compact",
    "keep_tokens",
    "safe_cutoff",
    "shorten_old_arguments",
    "trigger_tokens",
    "truncate_arguments",
]

logger = Logger(child=True)

FALLBACK_TRIGGER_TOKENS = 160_000
TRUNCATION_TEXT = "...(argument truncated)"
MAX_SUMMARY_INPUT_CHARS = 200_000
#: a summary that chains into every later one must stay small, whatever the model writes
MAX_SUMMARY_TOKENS = 4000

SUMMARY_PROMPT = """\
You extract the context that matters from a conversation that is about to be replaced by \
your summary, because the model's input limit is near. Keep what the conversation needs to \
go on well; do not repeat actions that are already done.

Write four Markdown sections, with "None" under any that is empty:
## SESSION INTENT
The user's goal in this session.
## SUMMARY
Key context, decisions and their reasons, options that were rejected.
## ARTIFACTS
Files, resources and results that were created, changed or used (paths, names, values).
## NEXT STEPS
What remains to be done.

Reply with the summary only.

<messages>
{messages}
</messages>"""


def trigger_tokens(settings: Settings) -> int:
    if settings.compaction_trigger_tokens > 0:
        return settings.compaction_trigger_tokens
    window = context_window(settings)
    if window <= 0:
        return FALLBACK_TRIGGER_TOKENS
    usable = window - settings.compaction_reserve_tokens
    return usable if usable > 0 else max(1, window // 2)


def keep_tokens(settings: Settings) -> int:
    """Token budget of the kept tail; 0 means "keep ``compaction_keep_messages``"."""
    if settings.compaction_keep_tokens >= 0:
        return settings.compaction_keep_tokens
    window = context_window(settings)
    if window <= 0:
        return 0
    usable = window - settings.compaction_reserve_tokens
    return min(8000, max(2000, int(usable * 0.25)))


def safe_cutoff(messages: list[Message], cutoff: int) -> int:
    """Move ``cutoff`` so no assistant tool call is separated from its results. A cut that
    lands in a run of tool results moves back before the assistant that called them (the
    whole exchange is kept); without such an assistant it moves past the run."""
    if cutoff <= 0 or cutoff >= len(messages) or messages[cutoff].role != "tool":
        return cutoff
    end = cutoff
    ids = set()
    while end < len(messages) and messages[end].role == "tool":
        if messages[end].tool_call_id:
            ids.add(messages[end].tool_call_id)
        end += 1
    if not ids:
        return end
    for index in range(cutoff - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant" and ids & {call.id for call in message.tool_calls}:
            return index
    return end


def shorten_old_arguments(context: WorkingContext, settings: Settings) -> None:
    """truncate_args: tool-call arguments older than the newest ``keep_messages`` lose
    their long string values, so a big argument is not re-sent on every call."""
    old = len(context.messages) - settings.compaction_keep_messages
    if old > 0:
        context.messages = [
            *truncate_arguments(context.messages[:old], settings.compaction_max_arg_length),
            *context.messages[old:],
        ]


def truncate_arguments(messages: list[Message], max_length: int) -> list[Message]:
    """Shorten long string values inside tool-call arguments (keeping them valid JSON)."""

    def shorten(value: object) -> object:
        if isinstance(value, str) and len(value) > max_length:
            return value[:20] + TRUNCATION_TEXT
        if isinstance(value, dict):
            return {k: shorten(v) for k, v in value.items()}
        if isinstance(value, list):
            return [shorten(v) for v in value]
        return value

    out = []
    for message in messages:
        if message.role == "assistant" and any(
            len(c.arguments) > max_length for c in message.tool_calls
        ):
            calls = []
            for call in message.tool_calls:
                try:
                    arguments = json.dumps(shorten(json.loads(call.arguments)), ensure_ascii=False)
                except (ValueError, RecursionError):  # not JSON, or nested past the parser
                    arguments = call.arguments[:20] + TRUNCATION_TEXT
                calls.append(ToolCall(id=call.id, name=call.name, arguments=arguments))
            message = message.model_copy(update={"tool_calls": calls})
        out.append(message)
    return out


@dataclass(frozen=True)
class _Cut:
    cutoff: int  # messages[:cutoff] are summarised
    reason: str


def _plan(rt: Runtime, context: WorkingContext, pending: list[Message], force: bool) -> _Cut | None:
    settings = rt.settings
    messages = [*context.messages, *pending]
    count = rt.counter.count
    sizes = [
        count(m.content) + sum(count(c.arguments) + 8 for c in m.tool_calls) + 4 for m in messages
    ]
    total = sum(sizes) + count(context.summary or "")
    if not force:
        by_count = 0 < settings.compaction_trigger_messages <= len(messages)
        by_tokens = total >= trigger_tokens(settings)
        if not (by_count or by_tokens):
            return None
    budget = 0 if force else keep_tokens(settings)
    if budget > 0:  # keep the newest messages that fit the token budget
        kept, cutoff = 0, len(messages)
        while cutoff > 0 and kept + sizes[cutoff - 1] <= budget:
            cutoff -= 1
            kept += sizes[cutoff]
        cutoff = min(cutoff, len(messages) - 1)
        if settings.compaction_trigger_messages > 0:
            # never keep as many messages as trigger a compaction: a tail that fits the
            # token budget but holds 50+ messages would compact again on every turn
            cutoff = max(cutoff, len(messages) - settings.compaction_keep_messages)
    else:
        cutoff = max(0, len(messages) - settings.compaction_keep_messages)
    cutoff = min(safe_cutoff(messages, cutoff), len(context.messages))  # never the new message
    if cutoff <= 0:
        return None
    return _Cut(cutoff, "forced" if force else f"{len(messages)} messages, {total} tokens")


def compact(
    rt: Runtime,
    context: WorkingContext,
    pending: list[Message],
    *,
    force: bool = False,
    model: ChatModel | None = None,
) -> Usage | None:
    """Compact ``context`` in place when it is due (or ``force``); returns the summary
    call's usage if it did, None if not. Raises ``ModelError`` only when forced;
    otherwise a failed summary just skips. ``model``: the compaction role's (metered by
    a turn), by default the runtime's."""
    cut = _plan(rt, context, pending, force)
    if cut is None:
        return None
    prefix = context.messages[: cut.cutoff]
    rendered = render_messages(prefix, arg_chars=0, result_chars=500)
    if len(rendered) > MAX_SUMMARY_INPUT_CHARS:  # the oldest part is in the log and ledgers
        rendered = rendered[-MAX_SUMMARY_INPUT_CHARS:]
    previous = markup.wrap("previous_summary", context.summary) + "\n" if context.summary else ""
    prompt = render_template(
        rt.settings.compaction_summary_prompt or SUMMARY_PROMPT, messages=previous + rendered
    )
    try:
        answer = (model or rt.models.for_role("compaction")).complete(
            ChatRequest(
                messages=[Message(role="user", content=prompt)],
                purpose="compact",
                # a memory call: deterministic and bounded (memory.jobs.calls)
                temperature=rt.settings.memory_temperature,
                seed=rt.settings.memory_seed,
                max_output_tokens=MAX_SUMMARY_TOKENS,
            )
        )
    except ModelError:
        if force:
            raise
        logger.warning("compaction summary failed; the turn goes on uncompacted", exc_info=True)
        return None
    summary = answer.message.content.strip() or "(Summary unavailable)"
    context.summary = rt.counter.head_tail(
        summary, MAX_SUMMARY_TOKENS, "[summary cut: {kept} of {total} tokens kept]"
    ).text
    context.messages = context.messages[cut.cutoff :]
    logger.info("compacted", extra={"summarised": cut.cutoff, "reason": cut.reason})
    return answer.usage
