"""Operator commands over the same library the handlers use.

    python -m agent_harness.cli [--env-file F | --stack NAME] <command> <user> ...

    users [PREFIX] [--limit N]                  users whose id starts with PREFIX, at a glance
    usage USER [--days N]                       a user's tokens by role and day, turns, calls
    top [--day D] [--limit N]                   the heaviest users of a day (default today)
    budget USER [--tokens N] [--turns N] [--memory-tokens N] [--clear]
                                                a user's daily budget: show, override, clear
    show USER [--day D | --versions | --days]   MEMORY.md (or one ledger day, versions, days)
    search USER QUERY [--mode M] [--limit N]    memory_search over MEMORY.md and ledgers
    trace USER TEXT                             which ledger sections (session, turns, model)
                                                a MEMORY.md line came from
    reach USER TEXT|FACT_ID                     where a fact was written, and every turn
                                                it reached (recalled, injected, a tool's hit)
    turn-memory USER SESSION TURN               what memory reached one turn's model, and why
    fact USER FACT_ID                           a ledger fact, where it stands, its history
    correct USER FACT_ID [--by TEXT] [--reason TEXT]
                                                supersede a ledger fact (--by), or retract it
    review USER [approve|reject ID]             lines held for review: list, or decide one
    scopes                                      shared memory scopes and their members' count
    members SCOPE                               a shared scope's members and roles
    grant SCOPE USER member|maintainer          make USER a member (reads) or maintainer
                                                (writes) of SCOPE (project:<name>, agent:<name>,
                                                org)
    revoke SCOPE USER                           take USER out of SCOPE
    consolidate-now USER [--queue]              run a forced consolidation here (or queue it)
    rollback USER VERSION_ID                    restore a MEMORY.md version (a new version)
    forget USER --yes                           delete every object version and item of USER
    dlq list flush|consolidation [--limit N]    jobs that failed too often (left in place)
    dlq redrive flush|consolidation             send them back to their queue

Where the stack is:
  * ``--env-file local_stack/sam-env.json``: the local stack (``make dev``) or any JSON of
    environment variables, flat or per function as ``sam local --env-vars`` takes it;
  * ``--stack NAME``: a deployed stack, found through its CloudFormation outputs (the
    AWS credentials and region of your shell);
  * neither: the ``HARNESS_*`` variables of the environment.

Model settings (``HARNESS_MEMORY_MODEL``, keys) come from the environment as usual;
``consolidate-now`` uses them. Exit status: 0 done, 1 failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import ConfigError, HarnessError
from agent_harness.ids import User
from agent_harness.settings import ENV, Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from agent_harness.runtime import Runtime

__all__ = ["main", "runtime_from", "stack_environment"]

#: CloudFormation output -> environment variable
STACK_OUTPUTS = {
    "WorkspaceBucketName": ENV["bucket"],
    "StateTableName": ENV["table"],
    "FlushQueueUrl": ENV["flush_queue_url"],
    "ConsolidationQueueUrl": ENV["consolidation_queue_url"],
}
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def stack_environment(env_file: str | None, stack: str | None) -> dict[str, str]:
    """The variables that locate the stack, on top of the process environment."""
    env = dict(os.environ)
    if env_file:
        data = json.loads(Path(env_file).read_text(encoding="utf-8"))
        if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
            # per function (sam local --env-vars): the consolidation function sees it all
            merged: dict[str, Any] = {}
            for section in data.values():
                merged.update(section)
            data = merged
        env.update({k: str(v) for k, v in data.items() if str(v) != ""})
        if not Path(env.get("TIKTOKEN_CACHE_DIR", "/")).is_dir():
            env.pop("TIKTOKEN_CACHE_DIR", None)  # a Lambda path (/opt/...): use the package's
        if env.get("AWS_ENDPOINT_URL", "").startswith(("http://127.0.0.1", "http://localhost")):
            for key, value in LOCAL_CREDENTIALS.items():
                env.setdefault(key, value)
            env.setdefault("AWS_REGION", env["AWS_DEFAULT_REGION"])
    if stack:
        import boto3

        outputs = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
        for output in outputs.get("Outputs", []):
            if output["OutputKey"] in STACK_OUTPUTS:
                env[STACK_OUTPUTS[output["OutputKey"]]] = output["OutputValue"]
    return env


def runtime_from(env: Mapping[str, str]) -> Runtime:
    from agent_harness.runtime import Runtime

    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    return Runtime.from_settings(Settings.from_env(env))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent_harness.cli", description="Operate a user's agent memory."
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--env-file", help="JSON of environment variables (sam-env.json)")
    where.add_argument("--stack", help="a deployed CloudFormation stack name")
    commands = parser.add_subparsers(dest="command", required=True)

    users = commands.add_parser("users", help="find users by id prefix, with their sizes")
    users.add_argument("prefix", nargs="?", default="")
    users.add_argument("--limit", type=int, default=50)

    usage = commands.add_parser("usage", help="a user's spend by day and role")
    usage.add_argument("user")
    usage.add_argument("--days", type=int, default=7)

    top = commands.add_parser("top", help="the heaviest users of a day, by tokens")
    top.add_argument("--day", help="YYYY-MM-DD (default: today in HARNESS_TIMEZONE)")
    top.add_argument("--limit", type=int, default=10)

    budget = commands.add_parser("budget", help="show or override a user's daily budget")
    budget.add_argument("user")
    budget.add_argument("--tokens", type=int, help="agent and compaction tokens a day (0: none)")
    budget.add_argument("--turns", type=int, help="turns a day (0: unlimited)")
    budget.add_argument("--memory-tokens", type=int, help="memory-model tokens a day")
    budget.add_argument("--clear", action="store_true", help="remove the override")

    show = commands.add_parser("show", help="print MEMORY.md, a ledger day, versions or days")
    show.add_argument("user")
    pick = show.add_mutually_exclusive_group()
    pick.add_argument("--day", help="print this ledger day (YYYY-MM-DD)")
    pick.add_argument("--versions", action="store_true", help="list MEMORY.md versions")
    pick.add_argument("--days", action="store_true", help="list the ledger days")

    search = commands.add_parser("search", help="search MEMORY.md and the ledgers")
    search.add_argument("user")
    search.add_argument("query")
    search.add_argument("--mode", default="ranked", choices=["phrase", "all", "any", "ranked"])
    search.add_argument("--limit", type=int, default=20)

    trace = commands.add_parser("trace", help="where a MEMORY.md line came from")
    trace.add_argument("user")
    trace.add_argument("text")

    reach = commands.add_parser("reach", help="where a fact was written and what it reached")
    reach.add_argument("user")
    reach.add_argument("fact", help="the fact's text, or its id (f...)")

    turn_memory = commands.add_parser("turn-memory", help="what memory reached one turn")
    turn_memory.add_argument("user")
    turn_memory.add_argument("session")
    turn_memory.add_argument("turn", type=int)

    fact = commands.add_parser("fact", help="a ledger fact, where it stands, and its history")
    fact.add_argument("user")
    fact.add_argument("fact_id", help="YYYY-MM-DD.<8 hex>, as search hits show it")

    correct = commands.add_parser("correct", help="supersede or retract a ledger fact")
    correct.add_argument("user")
    correct.add_argument("fact_id", help="YYYY-MM-DD.<8 hex>, as search hits show it")
    correct.add_argument("--by", help="the corrected fact (without it: retract the fact)")
    correct.add_argument("--reason", help="why a retracted fact is no longer true")

    review = commands.add_parser("review", help="lines held for review: list or decide")
    review.add_argument("user")
    review.add_argument("action", nargs="?", choices=["approve", "reject"])
    review.add_argument("item", nargs="?", help="the item's id (from the list)")

    commands.add_parser("scopes", help="shared memory scopes and their members' count")
    members = commands.add_parser("members", help="a shared scope's members and roles")
    members.add_argument("scope", help="project:<name>, agent:<name> or org")
    grant = commands.add_parser("grant", help="grant a user a role in a shared scope")
    grant.add_argument("scope", help="project:<name>, agent:<name> or org")
    grant.add_argument("user")
    grant.add_argument("role", choices=["member", "maintainer"])
    revoke = commands.add_parser("revoke", help="take a user out of a shared scope")
    revoke.add_argument("scope", help="project:<name>, agent:<name> or org")
    revoke.add_argument("user")

    consolidate = commands.add_parser("consolidate-now", help="consolidate one user now")
    consolidate.add_argument("user")
    consolidate.add_argument("--queue", action="store_true", help="queue a job instead")

    reindex = commands.add_parser(
        "reindex", help="rebuild a user's ranked-index snapshots (derived, index/ranked/)"
    )
    reindex.add_argument("user")

    vectors = commands.add_parser(
        "vectors",
        help="embed what a user's memory and messages lack (after a model change), with progress",
    )
    vectors.add_argument("user")

    rollback = commands.add_parser("rollback", help="restore a MEMORY.md version")
    rollback.add_argument("user")
    rollback.add_argument("version_id")

    forget = commands.add_parser("forget", help="delete everything of one user")
    forget.add_argument("user")
    forget.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")

    restore = commands.add_parser(
        "restore", help="copy memory from a bucket and table a stack kept into this stack's"
    )
    restore.add_argument("--from-bucket", required=True, help="the kept workspace bucket")
    restore.add_argument("--from-table", required=True, help="the kept (or PITR) table")
    restore.add_argument("--as-of", help="the objects as they stood then (ISO time)")
    restore.add_argument("--user", help="one user only (default: every user and scope)")
    restore.add_argument("--yes", action="store_true", help="confirm: overwrites this stack's")

    dlq = commands.add_parser("dlq", help="dead-letter queues: list or redrive")
    dlq.add_argument("action", choices=["list", "redrive"])
    dlq.add_argument("queue", choices=["flush", "consolidation"])
    dlq.add_argument("--limit", type=int, default=100)
    return parser


def _print(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def run(args: argparse.Namespace, rt: Runtime, out: Callable[[str], None] = print) -> int:
    """One command against ``rt``; returns the exit status."""
    from agent_harness.memory import files
    from agent_harness.memory.search import search_memory

    if args.command == "dlq":
        return _dlq(args, rt)
    if args.command == "restore":
        return _restore(args, rt, out)
    if args.command == "users":
        return _users(args, rt)
    if args.command == "top":
        return _top(args, rt)
    if args.command in ("scopes", "members", "grant", "revoke"):
        return _scopes(args, rt)
    user = User.from_id(args.user)
    if args.command == "show":
        if args.day:
            out(files.get_ledger_day(rt, user, args.day))
        elif args.versions:
            _print([v.__dict__ for v in files.list_memory_versions(rt, user)])
        elif args.days:
            _print(files.list_ledger_days(rt, user))
        else:
            document = files.get_memory(rt, user)
            out(document.content if document.etag else "(no MEMORY.md yet)")
    elif args.command == "usage":
        from agent_harness.usage import usage_report

        _print(usage_report(rt, user, args.days).view())
    elif args.command == "budget":
        return _budget(args, rt, user)
    elif args.command == "search":
        hits = search_memory(rt, user, args.query, args.mode, args.limit, rt.search_cache)
        rows = [
            {"path": h.path, "line": h.line, "text": h.text, "authority": h.authority} for h in hits
        ]
        _print(rows)
    elif args.command == "trace":
        from agent_harness.memory.provenance import trace_line

        _print([s.__dict__ for s in trace_line(rt, user, args.text)])
    elif args.command == "reach":
        from agent_harness.memory.chain import fact_reach

        _print(fact_reach(rt, user, args.fact).__dict__)
    elif args.command == "turn-memory":
        from agent_harness.memory.chain import turn_memory

        _print(turn_memory(rt, user, args.session, args.turn))
    elif args.command in ("fact", "correct"):
        return _correct(args, rt, user)
    elif args.command == "review":
        return _review(args, rt, user, out)
    elif args.command == "consolidate-now":
        from agent_harness.memory.jobs.consolidate import consolidate
        from agent_harness.memory.jobs.schedule import forced_job, request_consolidation

        if args.queue:
            job = request_consolidation(rt, user)
            _print({"queued": True, "requested_at": job.requested_at})
        else:
            _print(consolidate(rt, forced_job(rt, user)).__dict__)
    elif args.command == "reindex":
        from agent_harness.memory.engine.corpus import refresh_snapshots

        # a damaged or outdated snapshot reads as empty, so it is rebuilt whole
        _print({"snapshots_written": refresh_snapshots(rt, user)})
    elif args.command == "vectors":
        from agent_harness.memory.vectors import backfill

        if rt.embeddings() is None:
            out("no embedding model: set HARNESS_EMBEDDING_MODEL (docs/models.md)")
            return 2

        def progress(part: str, done: Any) -> None:  # on stderr: stdout stays JSON
            line = f"{part}: {done.embedded} embedded, {done.missing} to go, {done.lines} lines"
            print(line, file=sys.stderr, flush=True)

        _print({part: asdict(done) for part, done in backfill(rt, user, progress).items()})
    elif args.command == "rollback":
        document = files.rollback_memory(rt, user, args.version_id, writer="cli")
        _print({"restored": args.version_id, "etag": document.etag})
    elif args.command == "forget":
        if not args.yes:
            out(f"refusing to forget {user.id!r} without --yes (this cannot be undone)")
            return 2
        from agent_harness.memory.jobs.forget import forget_user

        _print(asdict(forget_user(rt, user)))
    return 0


def _review(args: argparse.Namespace, rt: Runtime, user: User, out: Callable[[str], None]) -> int:
    from agent_harness.memory.review import decide, list_review

    if args.action is None:
        _print([item.view() for item in list_review(rt, user)])
        return 0
    if not args.item:
        out(f"review {args.action} needs the item's id")
        return 2
    _print(decide(rt, user, args.item, args.action).view())
    return 0


def _correct(args: argparse.Namespace, rt: Runtime, user: User) -> int:
    """``fact``: the GET view; ``correct``: an operator's correction, then the view."""
    from agent_harness.memory.facts.corrections import correct_fact, fact_view, find_fact

    if args.command == "correct":
        done = correct_fact(
            rt,
            user,
            args.fact_id,
            args.by,
            authority="operator",
            writer="cli",
            via="correct",
            reason=args.reason,
        )
        _print({"id": done.id, "retired": done.retired, "state": done.state})
        return 0
    _print(fact_view(*find_fact(rt, user, args.fact_id)))
    return 0


def _users(args: argparse.Namespace, rt: Runtime) -> int:
    from agent_harness.overview import find_users, user_overview

    found = []
    for user in find_users(rt, args.prefix, limit=args.limit):
        view = user_overview(rt, user)
        found.append(
            {
                "user": user.id,
                "memory_bytes": view.memory_bytes,
                "ledger_days": view.ledger_days,
                "ledger_bytes": view.ledger_bytes,
                "sessions": view.sessions,
                "last_activity": view.last_activity,
                "consolidation_due": view.state.is_due,
                "unmerged_bytes": view.unmerged_bytes,
            }
        )
    _print(found)
    return 0


def _scopes(args: argparse.Namespace, rt: Runtime) -> int:
    from agent_harness import scopes

    if args.command == "scopes":
        _print(scopes.list_scopes(rt))
    elif args.command == "members":
        _print(scopes.list_members(rt, args.scope))
    elif args.command == "grant":
        _print(scopes.set_member(rt, args.scope, User.from_id(args.user), args.role))
    else:
        _print(scopes.remove_member(rt, args.scope, User.from_id(args.user)))
    return 0


def _budget(args: argparse.Namespace, rt: Runtime, user: User) -> int:
    from agent_harness.ports import Budget
    from agent_harness.usage import budget_view, set_user_budget

    if args.clear:
        view = set_user_budget(rt, user, None)
    elif any(v is not None for v in (args.tokens, args.turns, args.memory_tokens)):
        given = {"tokens": args.tokens, "turns": args.turns, "memory_tokens": args.memory_tokens}
        current = rt.table.get_budget(user) or Budget()
        changed = replace(current, **{k: v for k, v in given.items() if v is not None})
        view = set_user_budget(rt, user, changed)
    else:
        view = budget_view(rt, user)
    if not view["budgets_on"]:
        print(
            "note: this stack has no daily budget set, so overrides do not apply", file=sys.stderr
        )
    _print(view)
    return 0


def _top(args: argparse.Namespace, rt: Runtime) -> int:
    from agent_harness.usage import top_report

    _print(top_report(rt, args.day, args.limit))
    return 0


def _restore(args: argparse.Namespace, rt: Runtime, out: Callable[[str], None]) -> int:
    from datetime import datetime

    from agent_harness.aws.restore import restore

    if not args.yes:
        out("refusing to restore without --yes (it overwrites this stack's copies)")
        return 2
    as_of = datetime.fromisoformat(args.as_of) if args.as_of else None
    if as_of is not None and as_of.tzinfo is None:
        out("--as-of needs a UTC offset (2026-12-01T09:00:00+00:00)")
        return 2
    done = restore(
        rt.clients["s3"],
        rt.clients["dynamodb"],
        from_bucket=args.from_bucket,
        to_bucket=rt.settings.bucket,
        from_table=args.from_table,
        to_table=rt.settings.table,
        as_of=as_of,
        user=User.from_id(args.user) if args.user else None,
    )
    _print(asdict(done))
    return 0


def _dlq(args: argparse.Namespace, rt: Runtime) -> int:
    from agent_harness.aws import dlq

    sqs = rt.clients["sqs"]
    source = (
        rt.settings.flush_queue_url
        if args.queue == "flush"
        else rt.settings.consolidation_queue_url
    )
    dead = dlq.dead_letter_queue(sqs, source)
    if args.action == "list":
        _print([letter.__dict__ for letter in dlq.peek(sqs, dead, args.limit)])
    else:
        _print({"redriven": dlq.redrive(sqs, dead, source, args.limit)})
    return 0


def main(argv: Sequence[str] | None = None, *, runtime: Runtime | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        rt = runtime or runtime_from(stack_environment(args.env_file, args.stack))
        return run(args, rt)
    except (ConfigError, HarnessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
