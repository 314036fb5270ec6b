"""One agent turn, POST /v1/sessions/{id}/messages. No memory LLM work on this path.

    1 DynamoDB UpdateItem   session lease (409 + Retry-After when held); turn counter and
                            pause mark read. With daily budgets on, a TransactWriteItems
                            that also admits the turn (429 over budget; agent/lease)
    2 S3 GET                MEMORY.md  -> reference message, capped       } concurrent
    3 S3 GET                context.json; AGENTS.md instead for a new     }
                            session (the persona is kept in the context)
      (bound scopes)        a session bound to shared scopes: one Query of the caller's
                            memberships; each scope's root LIST reused like recall's
                            (one relisted a turn), its MEMORY.md its own block
      model loop            agent role, bounded; memory and MCP tools run here (agent.exposure)
    4 S3 PUT                sessions/<s>/turns/<n>.json, create-only (the thread log);
                            then the turn's memory_save and memory_correct calls
    5 S3 PUT                context.json, If-Match / If-None-Match
    6 DynamoDB write        turn := n, lease released, the turn's spend counted (and a
                            stateless client's place: ChatTerms.places): one TransactWriteItems
    7 SQS SendMessage       post-turn job (FlushQueue, group = user)

Seven AWS requests (docs/design.md#budgets); steps 4, 7 and the saves are ``agent.commit``.
Until step 4 nothing durable is written, so a model failure leaves no trace but a released
lease (docs/design.md#failed-model-writes-nothing); the turn object is written before the
reply is returned (docs/design.md#no-lost-turn).

When the model calls one of the caller's own tools the turn pauses instead (agent/pause):
4 PUT context.json with the turn so far, 5 TransactWriteItems: pause mark + release and the
spend so far counted (every model call is counted when its request ends, however it ends:
meter, usage.count_unfinished); the answer is ``requires_action`` with the calls. The
results come as a new request on the same turn: 1 lease, 2 GET context.json (MEMORY.md is
reused as the turn first saw it), the loop goes on, then 4-7 as above, or another pause.
A chat completion (``ChatTerms``) closes a paused turn its conversation went past instead
of a 409 (pause: settle), and brings its own instructions for the system prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from agent_harness.agent import pause
from agent_harness.agent.client_tools import NOT_RUN, ClientTools, declare_tools
from agent_harness.agent.commit import (
    TurnResult,
    apply_saves,
    enqueue_post_turn,
    log_turn,
    write_turn,
)
from agent_harness.agent.compaction import compact, shorten_old_arguments
from agent_harness.agent.context import (
    build_messages,
    load_context,
    memory_reference,
    read_persona,
    save_context,
    system_prompt,
)
from agent_harness.agent.draft import Draft
from agent_harness.agent.eviction import Evictor
from agent_harness.agent.exposure import Exposure
from agent_harness.agent.history import turn_numbers
from agent_harness.agent.importer import (
    check_history,
    extend_context,
    history_records,
    imported_turns,
    put_records,
)
from agent_harness.agent.lease import session_lease
from agent_harness.agent.loop import LoopResult, run_loop
from agent_harness.agent.options import resumed
from agent_harness.agent.recall import Recall, start_recall
from agent_harness.agent.request import ChatTerms, check_request
from agent_harness.agent.scoped import Binding, ScopeMemories, bound_grants, with_blocks
from agent_harness.agent.spend import TurnSpend
from agent_harness.agent.toolset import turn_tools
from agent_harness.clock import epoch_ms, iso
from agent_harness.errors import (
    ContextOverflowError,
    ConversationDivergedError,
    ModelOutputError,
    SessionNotFoundError,
)
from agent_harness.ids import validate_session_id
from agent_harness.meter import Spend
from agent_harness.models.base import Message, ToolSpec
from agent_harness.paths import turn_path
from agent_harness.ports import AdmissionCheck, PauseMark
from agent_harness.records import MemoryInjection, PendingTurn, TurnRecord, WorkingContext
from agent_harness.usage import release_turn

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from agent_harness.agent.client_tools import Declaration, ToolResult
    from agent_harness.agent.importer import ImportedMessage
    from agent_harness.agent.lease import SessionLease
    from agent_harness.agent.options import TurnOptions
    from agent_harness.ids import User
    from agent_harness.ports import Place, SessionState, StoredObject
    from agent_harness.runtime import Runtime
    from agent_harness.scopes import Grant

__all__ = ["run_turn"]

logger = Logger(child=True)
metrics = Metrics()


def run_turn(
    rt: Runtime,
    user: User,
    session_id: str,
    message: str | None = None,
    *,
    tools: Sequence[Declaration] | None = None,
    tool_results: list[ToolResult] | None = None,
    cancel: bool = False,
    history: list[ImportedMessage] | None = None,
    persona: str | None = None,
    options: TurnOptions | None = None,
    chat: ChatTerms | None = None,
    binding: Binding | None = None,
) -> TurnResult:
    """A new message (with the caller's ``tools``), or the ``tool_results`` / ``cancel``
    of the turn that awaits them. Every refusal comes before anything is written.

    For a session that has no turn yet, ``history`` (earlier messages the caller holds)
    becomes its first turns, as an import, and ``persona`` replaces AGENTS.md; both are
    written with the turn, so a failed model call leaves nothing. ``options`` shape the
    agent's model calls (agent/options); a resume's tool choice is its own (none sent:
    auto), and one sent without options keeps the turn's format and sampling (not on
    the OpenAI routes, ``chat``, where every request's options are its own).
    ``chat``: a chat completion's terms (its instructions, settling a paused turn, its
    branch point). ``binding``: the shared scopes a first message binds, and the caller's
    groups (agent.scoped)."""
    chat = chat or ChatTerms()
    validate_session_id(session_id)
    check_request(rt, message, tool_results, cancel, settle=chat.settle)
    if history:
        check_history(history)
    declared = declare_tools(tools, rt.settings) if tools is not None else None
    started = rt.clock.now()
    # the user's budgets are checked by the write that takes the lease, before any
    # model call (a cancel spends nothing new); results and cancels are for a turn that
    # exists: a session never seen stays unmade
    admit = None if cancel else message is not None
    admission: AdmissionCheck | None = None
    turn: _Turn | None = None
    keep_turn = False  # a paused turn's resume is the same turn
    try:
        with session_lease(rt, user, session_id, must_exist=message is None, admit=admit) as lease:
            admission = lease.admission
            turn = _Turn(rt, user, session_id, lease, started, options, binding or Binding())
            result = turn.serve(message, declared, tool_results, cancel, history, persona, chat)
            result.scopes = [str(g.scope) for g in turn.grants]
        keep_turn = result.status == "requires_action"
    except SessionNotFoundError:
        raise pause.no_pending(session_id) from None
    finally:  # what no write counted: a failed request's calls, an unspent admission
        if turn is not None:
            turn.settle(keep_turn=keep_turn)
        elif admission is not None:
            release_turn(rt, user, admission, keep_turn=keep_turn)
    if result.job_turn is not None:
        result.flush = enqueue_post_turn(rt, user, session_id, result, lease.state, started)
    return result


class _Turn:
    """One request on a session whose lease it holds."""

    def __init__(
        self,
        rt: Runtime,
        user: User,
        session_id: str,
        lease: SessionLease,
        started: datetime,
        options: TurnOptions | None,
        binding: Binding,
    ) -> None:
        self.rt, self.user, self.session_id = rt, user, session_id
        self.binding = binding
        self.grants: list[Grant] = []  # the session's shared scopes, granted again
        self.options = options  # the request's, for a new turn or a resume
        self.lease, self.started = lease, started
        self.settings = rt.settings
        self.tools_on = not self.settings.disable_memory_tools
        self.hooks_on = not self.settings.disable_memory_hooks
        self.context = WorkingContext(session_id=session_id)
        self.etag: str | None = None
        self.last_turn = lease.state.turn
        self.completed: int | None = None  # the last turn this request wrote
        self.instructions: str | None = None  # the request's own (None: the persona)
        self.chat = ChatTerms()
        self.history: list[TurnRecord] = []  # a new session's imported turns, to write
        #: every model call of this request, counted by the write that ends it
        self.spend = TurnSpend(rt, user, lease.admission)

    def settle(self, *, keep_turn: bool) -> None:
        """At the end of the request, count what no write counted."""
        self.spend.settle(keep_turn=keep_turn, history_unwritten=bool(self.history))

    # -- what the request asks ------------------------------------------------
    def serve(
        self,
        message: str | None,
        tools: list[ToolSpec] | None,
        results: list[ToolResult] | None,
        cancel: bool,
        history: list[ImportedMessage] | None = None,
        persona: str | None = None,
        chat: ChatTerms | None = None,
    ) -> TurnResult:
        chat = self.chat = chat or ChatTerms()
        self.instructions = chat.instructions
        state = self.lease.state
        if message is None and state.turn == 0 and state.pause is None:
            raise pause.no_pending(self.session_id)  # a new session awaits nothing
        who, queries = (self.rt, self.user, self.session_id), self.spend.queries
        recall = start_recall(*who, queries=queries, text=message) if message is not None else None
        memory = self._load(state, with_memory=message is not None)
        fresh = state.turn == 0 and state.pause is None and self.context.last_turn == 0
        # every request grants the session's scopes again, before anything is written
        self.grants = bound_grants(
            self.rt, self.user, self.context, self.binding, fresh=fresh and message is not None
        )
        reads = message is not None and self.grants
        scoped = ScopeMemories(self.rt, self.grants, recall=recall is not None) if reads else None
        pending = pause.effective_pending(state, self.context)
        self.context.pending = pending
        timeout = self.settings.tool_result_timeout_seconds
        if message is not None:
            held = pending.turn if pending is not None else self.last_turn
            if chat.at_turn is not None and chat.at_turn != held:
                raise ConversationDivergedError(
                    f"session {self.session_id} is at turn {held}; the conversation at "
                    f"turn {chat.at_turn}"
                )
            if pending is not None:
                if chat.settle:  # the client's conversation went on: it is the truth
                    self._settle(pending, results)
                elif not pause.expired(pending, self.started, timeout):
                    raise pause.results_required(self.session_id, pending, timeout)
                else:
                    self._close(pending, commit=False)  # forgotten by the caller: closed first
            if fresh:
                self._begin(history or [], persona)
            return self._start(message, tools or [], memory, recall, scoped)
        if pending is None:
            return self._repeat(results or [])
        if cancel:
            return self._close(pending, commit=True)
        assert results is not None
        pause.check_results(self.session_id, pending, results, timeout)
        return self._resume(pending, results, tools)

    def _load(self, state: SessionState, *, with_memory: bool) -> StoredObject | None:
        """The working context (agent.context.load_context); returns MEMORY.md."""
        fresh = state.turn == 0 and state.pause is None
        self.context, self.etag, memory = load_context(
            self.rt, self.user, self.session_id, fresh=fresh, with_memory=with_memory
        )
        # a completion written but never committed (a crash) still took its number
        self.last_turn = max(state.turn, self.context.last_turn)
        return memory

    def _begin(self, history: list[ImportedMessage], persona: str | None) -> None:
        """A new session: the caller's persona, and its earlier history as the first
        turns (in the context now, written with the turn)."""
        if persona is not None and persona.strip():
            self.context.agents_md = persona
        if history:
            # an import, under the day's import budget (given back if never written)
            self.spend.admit_history(imported_turns(history))
            # numbers of turn objects left by crashed calls are skipped, not reused
            first = max([0, *turn_numbers(self.rt, self.user, self.session_id)]) + 1
            self.history = history_records(self.session_id, first, history, self.started)
            extend_context(self.rt, self.context, self.history)
            self.last_turn = self.history[-1].turn

    def _write_history(self) -> None:
        if self.history:
            put_records(self.rt, self.user, self.session_id, self.history)
            self.completed = self.history[-1].turn
            self.history = []

    def _start(
        self,
        text: str,
        tools: list[ToolSpec],
        memory: StoredObject | None,
        recall: Recall | None,
        scoped: ScopeMemories | None = None,
    ) -> TurnResult:
        reference, injection, recalled = None, MemoryInjection(), None
        if recall is not None:  # MEMORY.md lags the ledgers: no retired fact is injected
            memory = recall.current_memory(memory, iso(self.started))
        blocks: list[str] = []
        if self.tools_on or self.hooks_on:
            cap, at = self.settings.consolidation_max_tokens, iso(self.started)
            blocks, scopes = scoped.blocks(self.rt.counter, cap, at) if scoped else ([], [])
            reference, injection = memory_reference(
                memory, self.rt.counter, cap - sum(s.tokens for s in scopes), at
            )
            injection = injection.model_copy(update={"scopes": scopes})
        if recall is not None:
            found = recall.message(
                memory, reference, text, iso(self.started), self.context.messages, scoped
            )
            recalled = found.message
            injection = injection.model_copy(update=found.recorded())
        draft = Draft(
            instructions=self.instructions,
            number=self.last_turn + 1,
            started=iso(self.started),
            user_message=Message(role="user", content=text),
            reference=with_blocks(reference, blocks),
            memory=injection,
            recall=recalled,
            client_tools=tools,
            options=self.options,
        )
        shorten_old_arguments(self.context, self.settings)
        if self.settings.compaction_enabled:
            self._compact(draft, force=False)
        return self._advance(draft)

    def _resume(
        self, pending: PendingTurn, results: list[ToolResult], tools: list[ToolSpec] | None
    ) -> TurnResult:
        evict = Evictor(self.rt, self.user, self.session_id)
        draft = Draft.resumed(pending, pause.answer_calls(pending, results, evict))
        if tools is not None:
            draft.client_tools = tools
        draft.options = resumed(draft.options, self.options, per_request=self.chat.settle)
        if self.instructions is not None:
            draft.instructions = self.instructions
        return self._advance(draft)

    def _close(self, pending: PendingTurn, *, commit: bool) -> TurnResult:
        """Answer every pending call as cancelled; one last model call, without tools."""
        draft = Draft.resumed(pending, pause.answer_calls(pending, None, lambda _, r: r))
        draft.options = None  # its closing words are no answer the caller's format binds
        return self._advance(draft, final=True, commit=commit)

    def _settle(self, pending: PendingTurn, results: list[ToolResult] | None) -> None:
        """Write the paused turn as it stands, each call answered by the caller's result
        or as not run, without a model call: the caller's conversation went on."""
        evict = Evictor(self.rt, self.user, self.session_id)
        answered = pause.answer_calls(pending, results, evict, missing=NOT_RUN)
        draft = Draft.resumed(pending, answered)
        done = draft.loop
        closed = LoopResult(done.messages, "", done.usage, done.model_calls, done.model)
        self._complete(draft, closed, commit=False, settled=True)

    def _repeat(self, results: list[ToolResult]) -> TurnResult:
        """Results of a turn that completed: its answer again, never a second model run."""
        ids = {r.tool_call_id for r in results}
        if not ids <= set(self.context.answered):  # results are never empty here
            raise pause.no_pending(self.session_id)
        turn_no = self.context.last_turn
        stored = self.rt.store.get(self.user, turn_path(self.session_id, turn_no))
        record = TurnRecord.parse_or_none(stored.content) if stored else None
        if record is None:
            raise pause.no_pending(self.session_id)
        if self.lease.state.turn < turn_no:  # its commit was lost in a crash: finish it
            self.lease.commit(turn_no)
            self.completed = turn_no
        return self._result(record)

    # -- the model loop --------------------------------------------------------
    def _compact(self, draft: Draft, *, force: bool) -> bool:
        usage = compact(
            self.rt,
            self.context,
            [draft.user_message, *draft.loop.messages],
            force=force,
            model=self.spend.model("compaction"),
        )
        if usage is None:
            return False
        draft.compaction_usage += usage
        draft.compacted = True
        self.context.agents_md = read_persona(self.rt, self.user)  # a new chapter
        return True

    def _advance(self, draft: Draft, *, final: bool = False, commit: bool = True) -> TurnResult:
        def attempt() -> LoopResult:
            client = ClientTools(draft.client_tools) if draft.client_tools else None
            box = (self.rt, self.user, self.session_id, client, self.grants)
            untrusted, queries = self.context.untrusted, self.spend.queries
            tools = None if final else turn_tools(*box, untrusted, queries=queries)
            persona = draft.instructions or self.context.agents_md
            prompt = build_messages(
                system_prompt(persona, tools=self.tools_on, hooks=self.hooks_on),
                draft.reference,
                self.context,
                draft.user_message,
                draft.recall,
                framing=self.settings.framing,
            )
            limit = draft.loop.model_calls + 1 if final else self.settings.max_model_calls
            return run_loop(
                self.spend.model("agent"),
                prompt,
                tools=tools,
                max_calls=limit,
                done=draft.loop,
                options=draft.options,
                caller=frozenset(t.name for t in draft.client_tools),
            )

        try:
            result = attempt()
        except ContextOverflowError:
            # one forced compaction and one retry; a second overflow is the caller's 502
            if not self._compact(draft, force=True):
                raise ContextOverflowError(
                    "the conversation is over the model's context window and too short to "
                    f"compact (at most {self.settings.compaction_keep_messages} messages are "
                    "kept)"
                ) from None
            result = attempt()
        if result.paused:
            return self._pause(draft, result)
        return self._complete(draft, result, commit=commit)

    # -- durable ends: a pause, or the completed turn -----------------------------
    def _pause(self, draft: Draft, result: LoopResult) -> TurnResult:
        pending = pause.pending_turn(self.rt.new_id(), draft, result, iso(self.started))
        self.context.pending = pending
        self._write_history()
        self.etag = save_context(self.rt, self.user, self.context, self.etag)
        mark = PauseMark(pending.pause_id, pending.turn, epoch_ms(self.started))
        paused = TurnResult(
            session_id=self.session_id,
            turn=pending.turn,
            reply=None,
            usage=result.usage,
            memory_tokens=draft.memory.total_tokens,
            compacted=draft.compacted,
            flush=None,
            model=result.model,
            compaction_usage=draft.compaction_usage,
            status="requires_action",
            tool_calls=result.pending,
            job_turn=self.completed,
        )
        # the spend so far is counted by the pause's write, and the admission's estimate
        # given back (its resume is admitted on its own, not counted as a new turn)
        spent = self.spend.delta(draft.uncounted, completed=False)
        self.lease.pause(mark, self.last_turn, spent, self.places(paused))
        self.spend.written()
        draft.uncounted = Spend()
        metrics.add_metric("TurnPauses", MetricUnit.Count, 1)
        where = {"session_id": self.session_id, "turn": pending.turn}
        logger.info("turn paused for client tools", extra=where | {"calls": len(pending.calls)})
        return paused

    def _complete(
        self, draft: Draft, result: LoopResult, *, commit: bool, settled: bool = False
    ) -> TurnResult:
        if not result.reply.strip() and not settled:  # a settled turn ends with its calls
            raise ModelOutputError(f"{result.model} returned an empty reply")
        record = draft.record(self.session_id, result)
        self._write_history()
        record, fresh = write_turn(self.rt, self.user, record)
        apply_saves(self.rt, self.user, record, fresh, self.grants)
        self.context.messages = [*self.context.messages, *record.messages]
        Exposure.remember(self.context, record.messages, imported=False)
        self.context.last_turn = record.turn
        self.context.pending = None
        self.context.answered = draft.answered
        self.etag = save_context(self.rt, self.user, self.context, self.etag)
        self.last_turn = self.completed = record.turn
        # what this call spent, even where an earlier, crashed call wrote the record; a
        # paused turn closed late was counted when it began: this call's admission is
        # for the turn that follows
        done = self._result(record)
        if commit:
            spent = self.spend.delta(draft.uncounted, completed=True)
            self.lease.commit(record.turn, spent, self.places(done))
            self.spend.written()
        else:
            self.spend.hold_completed(draft.uncounted)
        draft.uncounted = Spend()
        log_turn(record, result.model_calls, len(draft.pauses), draft.memory.total_tokens)
        return done

    def places(self, result: TurnResult) -> Sequence[Place]:
        """Where a stateless client's conversation reached, put by the turn's end."""
        return self.chat.places(result) if self.chat.places is not None else ()

    def _result(self, record: TurnRecord) -> TurnResult:
        return TurnResult.of(record, job_turn=self.completed)
