"""Cold start of each handler against its floor (docs/design.md#budgets), and where the time goes.

    interpreter     python -c "pass"
    floor           python -c "import boto3; the clients the handler builds"
    init            python -c "import functions.<name>.app"  (settings, clients, router; no I/O)
    first response  init, then ``lambda_handler`` on a first event, against an embedded AWS

Each sample is a fresh interpreter, as a Lambda cold start is, timed from just before the
process is spawned to the moment the program prints that it is done (interpreter teardown
excluded). Samples are interleaved (interpreter, floor, each handler, each first response,
then again) so machine noise hits all of them alike; medians are kept. The budget is
init <= 1.3 x floor.

The floor is per handler: each handler's ``runtime.clients`` is read after import and the
floor creates exactly those clients (today all three build S3, DynamoDB and SQS through
``aws.clients``; model and secret clients are built lazily, on first use).

First response runs the real handler on its most ordinary event: a new session's first
turn (agent_call, offline model, JWT claims in the event), the post-turn job that turn
queued (memory_flush, offline memory model) and the schedule tick (memory_consolidate).
AWS is a moto server on 127.0.0.1 in this process, so each request costs a loopback round
trip instead of a real AWS one: the figures are a lower bound on what Lambda shows.

Where the time goes: ``python -X importtime -c "import functions.<name>.app"`` in the same
environment, parsed into the import tree, compared module by module with the floor's.
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.common import ROOT
from bench.plots import bars
from local_stack.lambdas import function_timeout, http_event, scheduled_event, sqs_record
from local_stack.process import free_port
from local_stack.resources import REGION, create_resources, function_environment, load_template
from local_stack.sam_env import lambda_environment

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

    from local_stack.resources import Resolver

#: the embedding model every handler is configured with (make dev's)
EMBEDDING_MODEL = "local:multilingual-e5-small"
TITLE = "Cold start per handler"
BUDGET = 1.3
HEADING = BUDGET
ROUNDS = {True: 3, False: 21}
IMPORTTIME_RUNS = {True: 1, False: 3}
TOP_PACKAGES = 10
TOP_SUBMODULES = 8
HEAVY_MS = 20.0  # under -X importtime: a module of our own this slow would be worth a look
OWN_PACKAGE = "agent_harness"
USER = "bench-cold-start"

READY = "import time\nprint('READY', time.time_ns())"
INTERPRETER = READY
FLOOR = (
    "import boto3\nsession = boto3.Session()\nclients = [session.client(n) for n in {names!r}]\n"
)
INIT = "import {module}\n"
#: init, then one invocation; prints when it answered, when init ended, and the response
FIRST_RESPONSE = """\
import importlib, json, sys, time
from types import SimpleNamespace
handler = importlib.import_module(sys.argv[1])
initialised = time.time_ns()
context = SimpleNamespace(
    function_name=sys.argv[3], aws_request_id="cold-start", memory_limit_in_mb=512,
    function_version="$LATEST", log_group_name="/aws/lambda/bench", log_stream_name="bench",
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:" + sys.argv[3],
    get_remaining_time_in_millis=lambda: int(sys.argv[4]),
)
response = handler.lambda_handler(json.loads(sys.argv[2]), context)
done = time.time_ns()
print("READY", done, initialised, int("tiktoken" in sys.modules), json.dumps(response, default=str))
"""
CLIENTS_PROBE = "import {module} as app\nprint('CLIENTS', *sorted(app.runtime.clients))"


@dataclass(frozen=True)
class Handler:
    name: str
    function_id: str
    first_event: str  # what the first-response sample sends, for the docs

    @property
    def module(self) -> str:
        return f"functions.{self.name}.app"


HANDLERS = (
    Handler("agent_call", "AgentCallFunction", "POST a message to a new session"),
    Handler("memory_flush", "MemoryFlushFunction", "that turn's post-turn job (SQS record)"),
    Handler("memory_consolidate", "MemoryConsolidateFunction", "the schedule tick"),
)


# -- fresh-interpreter samples ------------------------------------------------------------


def lambda_like_env(function_id: str) -> dict[str, str]:
    """What a deployed container of the function sees, with the repo on the path."""
    return {
        **lambda_environment(function_id),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{ROOT}:{ROOT / 'layers' / 'agent_harness'}",
    }


def timed(code: str, env: dict[str, str], *args: str) -> tuple[float, list[str]]:
    """Milliseconds from spawning a fresh interpreter to its READY line, and the rest of
    that line (split in at most four more fields)."""
    started = time.time_ns()
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=ROOT, capture_output=True, text=True
    )
    ready = [line for line in done.stdout.splitlines() if line.startswith("READY ")]
    if done.returncode != 0 or not ready:
        raise RuntimeError(f"cold-start sample failed:\n{done.stderr[-2000:]}")
    fields = ready[-1].split(" ", 4)[1:]
    return (int(fields[0]) - started) / 1e6, fields[1:]


@dataclass
class Program:
    code: str
    env: dict[str, str]
    samples: list[float] = field(default_factory=list)

    def sample(self) -> None:
        self.samples.append(timed(self.code, self.env)[0])


@dataclass
class EmbeddedAws:
    endpoint: str
    resolver: Resolver
    sqs: Any


@contextmanager
def embedded_aws() -> Iterator[EmbeddedAws]:
    """A moto server on a free loopback port with the template's resources."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        clients = {
            name: boto3.client(
                name,
                endpoint_url=endpoint,
                region_name=REGION,
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
            )
            for name in ("s3", "dynamodb", "sqs")
        }
        yield EmbeddedAws(endpoint, create_resources(load_template(), clients), clients["sqs"])
    finally:
        server.stop()


@dataclass
class FirstResponse:
    """Init plus the first invocation of one handler, against the embedded AWS. In each
    round agent_call goes first: its turn queues the job the flush sample then runs."""

    handler: Handler
    aws: EmbeddedAws
    total: list[float] = field(default_factory=list)
    init: list[float] = field(default_factory=list)
    tokenizer_loaded: list[bool] = field(default_factory=list)
    receipt: str | None = None

    @property
    def env(self) -> dict[str, str]:
        from agent_harness.tokens import DEFAULT_CACHE_DIR

        fid = self.handler.function_id
        return {
            **lambda_like_env(fid),
            **function_environment(self.aws.resolver, fid),
            "AWS_ENDPOINT_URL": self.aws.endpoint,
            "TIKTOKEN_CACHE_DIR": str(DEFAULT_CACHE_DIR),  # /opt/python/... in the layer
            # recall by meaning on, as make dev runs it: the model loads on first use
            "HARNESS_EMBEDDING_MODEL": EMBEDDING_MODEL,
        }

    def event(self, round_no: int) -> dict[str, Any]:
        if self.handler.name == "agent_call":
            event = http_event(
                "POST",
                f"/v1/sessions/cold-{round_no}/messages",
                headers={"content-type": "application/json"},
                body=json.dumps({"message": "Remember that I prefer green tea."}).encode(),
            )
            event["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": USER}}}
            return event
        if self.handler.name == "memory_flush":
            url = self.aws.resolver.refs["FlushQueue"]
            got = self.aws.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=1,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=2,
            ).get("Messages", [])
            if not got:
                raise RuntimeError("the agent_call sample queued no post-turn job")
            self.receipt = got[0]["ReceiptHandle"]
            arn = self.aws.resolver.attrs[("FlushQueue", "Arn")]
            return {"Records": [sqs_record(got[0], arn)]}
        return scheduled_event(f"arn:aws:events:{REGION}:123456789012:rule/bench")

    def check(self, response: dict[str, Any]) -> None:
        ok = {
            "agent_call": lambda r: r.get("statusCode") == 200,
            "memory_flush": lambda r: r.get("batchItemFailures") == [],
            "memory_consolidate": lambda r: "queued" in r,
        }[self.handler.name]
        if not ok(response):
            raise RuntimeError(f"{self.handler.name} first response failed: {response}")
        if self.receipt is not None:  # as the event source mapping does after a success
            url = self.aws.resolver.refs["FlushQueue"]
            self.aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=self.receipt)
            self.receipt = None

    def sample(self, round_no: int, keep: bool = True) -> None:
        timeout = function_timeout(self.aws.resolver.template, self.handler.function_id)
        event = json.dumps(self.event(round_no))
        args = (self.handler.module, event, self.handler.function_id, str(timeout * 1000))
        started = time.time_ns()
        total, (initialised, tokenizer, response) = timed(FIRST_RESPONSE, self.env, *args)
        self.check(json.loads(response))
        if keep:
            self.total.append(total)
            self.init.append((int(initialised) - started) / 1e6)
            self.tokenizer_loaded.append(tokenizer == "1")


# -- -X importtime ------------------------------------------------------------------------


@dataclass
class Node:
    name: str
    self_us: float
    level: int
    children: list[Node] = field(default_factory=list)

    @property
    def package(self) -> str:
        return self.name.split(".", 1)[0]


def parse_importtime(stderr: str) -> list[Node]:
    """The import tree (roots) from ``-X importtime`` output, which lists each module after
    the modules it imported, indented two spaces per level."""
    pending: list[Node] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|")
        node = Node(name.strip(), float(self_us), (len(name) - len(name.lstrip()) - 1) // 2)
        while pending and pending[-1].level > node.level:
            node.children.insert(0, pending.pop())
        pending.append(node)
    return pending


def walk(nodes: Iterable[Node]) -> Iterator[Node]:
    for node in nodes:
        yield node
        yield from walk(node.children)


def profile(code: str, env: dict[str, str], runs: int) -> tuple[list[Node], list[str]]:
    """The import tree of ``code`` with each module's least self time over ``runs`` (noise
    only ever adds time, as with timeit), and the program's stdout lines."""
    trees: list[list[Node]] = []
    stdout: list[str] = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"importtime run failed:\n{done.stderr[-2000:]}")
        trees.append(parse_importtime(done.stderr))
        stdout = done.stdout.splitlines()
    per_module: dict[str, list[float]] = defaultdict(list)
    for tree in trees:
        for node in walk(tree):
            per_module[node.name].append(node.self_us)
    roots = trees[0]
    for node in walk(roots):
        node.self_us = min(per_module[node.name])
    return roots, stdout


def added_us(node: Node, floor: set[str], stop: str | None = None) -> float:
    """Self time of ``node`` and of every module beneath it that the floor does not import
    (not descending into modules of package ``stop``)."""
    total = node.self_us if node.name not in floor else 0.0
    for child in node.children:
        if stop is None or child.package != stop:
            total += added_us(child, floor, stop)
    return total


def _ms(us: float) -> float:
    return round(us / 1000, 1)


def breakdown(roots: list[Node], floor_roots: list[Node], module: str) -> dict[str, Any]:
    """What the handler's import adds on top of the floor's."""
    floor = {n.name for n in walk(floor_roots)}
    floor_packages = {n.package for n in walk(floor_roots)}
    nodes = list(walk(roots))
    app = next(n for n in nodes if n.name == module)
    packages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def outermost(node: Node, inside: frozenset[str]) -> None:
        row = packages[node.package]
        row["self_us"] += node.self_us
        row["modules"] += 1
        if node.package not in inside:
            row["cumulative_us"] += added_us(node, floor)
        for child in node.children:
            outermost(child, inside | {node.package})

    for root in roots:
        outermost(root, frozenset())
    table = [
        {
            "package": name,
            "cumulative_ms": _ms(row["cumulative_us"]),
            "self_ms": _ms(row["self_us"]),
            "modules": int(row["modules"]),
        }
        for name, row in packages.items()
        if name not in floor_packages and name != "functions"
    ]
    table.sort(key=lambda r: -r["cumulative_ms"])
    own = [n for n in nodes if n.package == OWN_PACKAGE]
    submodules = []
    for node in own:
        pulled: dict[str, float] = defaultdict(float)
        for child in node.children:
            if child.package != OWN_PACKAGE:
                for sub in walk([child]):
                    if sub.name not in floor:
                        pulled[sub.package] += sub.self_us
        submodules.append(
            {
                "module": node.name,
                "self_ms": _ms(node.self_us),
                "pulls_in_ms": _ms(sum(pulled.values())),
                "total_ms": _ms(node.self_us + sum(pulled.values())),
                "pulls_in": [p for p, _ in sorted(pulled.items(), key=lambda kv: -kv[1])[:3]],
            }
        )
    submodules.sort(key=lambda r: -r["total_ms"])
    return {
        "import_ms": _ms(sum(n.self_us for n in nodes)),
        "floor_import_ms": _ms(sum(n.self_us for n in walk(floor_roots))),
        "added_ms": _ms(sum(n.self_us for n in nodes if n.name not in floor and n is not app)),
        "added_modules": sum(1 for n in nodes if n.name not in floor and n is not app),
        "app_body_ms": _ms(app.self_us),
        "packages": table[:TOP_PACKAGES],
        "own_package": {
            "package": OWN_PACKAGE,
            "modules": len(own),
            "self_ms": _ms(sum(n.self_us for n in own)),
            "total_ms": _ms(sum(added_us(n, floor, stop=OWN_PACKAGE) for n in own)),
            "submodules": submodules[:TOP_SUBMODULES],
        },
    }


# -- the benchmark ------------------------------------------------------------------------


def _stats(samples: list[float]) -> dict[str, Any]:
    p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else samples[0]
    return {
        "median_ms": round(statistics.median(samples), 1),
        "p90_ms": round(p90, 1),
        "samples_ms": [round(s, 1) for s in samples],
    }


def _floor_key(clients: list[str]) -> str:
    return "+".join(clients)


def run(quick: bool = False) -> dict[str, Any]:
    rounds = ROUNDS[quick]
    envs = {h.name: lambda_like_env(h.function_id) for h in HANDLERS}
    # which clients each handler builds (this also warms the .pyc files and the OS cache)
    profiles, clients = {}, {}
    for h in HANDLERS:
        code = CLIENTS_PROBE.format(module=h.module)
        roots, stdout = profile(code, envs[h.name], IMPORTTIME_RUNS[quick])
        profiles[h.name] = roots
        clients[h.name] = next(line for line in stdout if line.startswith("CLIENTS")).split()[1:]
    floor_clients = {_floor_key(c): c for c in clients.values()}
    any_env = envs[HANDLERS[0].name]
    floor_profiles = {
        key: profile(FLOOR.format(names=tuple(names)), any_env, IMPORTTIME_RUNS[quick])[0]
        for key, names in floor_clients.items()
    }
    programs = {
        "interpreter": Program(INTERPRETER, any_env),
        **{
            f"floor:{key}": Program(FLOOR.format(names=tuple(names)) + READY, any_env)
            for key, names in floor_clients.items()
        },
        **{h.name: Program(INIT.format(module=h.module) + READY, envs[h.name]) for h in HANDLERS},
    }
    with embedded_aws() as aws:
        first = [FirstResponse(h, aws) for h in HANDLERS]
        for program in programs.values():  # warm-up round, not kept
            timed(program.code, program.env)
        for sample in first:
            sample.sample(-1, keep=False)
        for round_no in range(rounds):
            for program in programs.values():
                program.sample()
            for sample in first:
                sample.sample(round_no)
    floors = {
        key: {"clients": names, **_stats(programs[f"floor:{key}"].samples)}
        for key, names in floor_clients.items()
    }
    interpreter = statistics.median(programs["interpreter"].samples)
    handlers = {}
    for h, fr in zip(HANDLERS, first, strict=True):
        key = _floor_key(clients[h.name])
        floor_ms = statistics.median(programs[f"floor:{key}"].samples)
        init_ms = statistics.median(programs[h.name].samples)
        handlers[h.name] = {
            "floor": key,
            "init": _stats(programs[h.name].samples),
            "ratio_to_floor": round(init_ms / floor_ms, 2),
            "ratio_above_interpreter": round((init_ms - interpreter) / (floor_ms - interpreter), 2),
            "within_budget": init_ms / floor_ms <= BUDGET,
            "first_response": {
                "event": h.first_event,
                **_stats(fr.total),
                "init_median_ms": round(statistics.median(fr.init), 1),
                "invocation_median_ms": round(
                    statistics.median(t - i for t, i in zip(fr.total, fr.init, strict=True)), 1
                ),
                "tokenizer_loaded": all(fr.tokenizer_loaded),
            },
            "imports": breakdown(profiles[h.name], floor_profiles[key], h.module),
        }
    return {
        "python": sys.version.split()[0],
        "rounds": rounds,
        "importtime_runs": IMPORTTIME_RUNS[quick],
        "budget": BUDGET,
        "heading": HEADING,
        "interpreter": _stats(programs["interpreter"].samples),
        "floors": floors,
        "handlers": handlers,
    }


# -- reporting ----------------------------------------------------------------------------


def _verdict(ratio: float, budget: float, heading: float) -> str:
    if ratio > budget:
        return "OVER BUDGET"
    return "ok" if ratio > heading else f"ok (<= {heading}x)"


def report(result: dict[str, Any]) -> str:
    lines = [
        f"cold start (python {result['python']}, median of {result['rounds']} fresh "
        "interpreters, spawn to ready)",
        f"  interpreter alone               {result['interpreter']['median_ms']:7.1f} ms",
    ]
    for key, floor in result["floors"].items():
        lines.append(f"  floor: boto3 + {key:<16} {floor['median_ms']:7.1f} ms")
    for name, row in result["handlers"].items():
        verdict = _verdict(row["ratio_to_floor"], result["budget"], result["heading"])
        fr = row["first_response"]
        imports = row["imports"]
        lines.append(
            f"  {name:<20} init {row['init']['median_ms']:7.1f} ms  "
            f"{row['ratio_to_floor']:.2f}x floor   {verdict}"
        )
        lines.append(
            f"  {'':<20} first response {fr['median_ms']:7.1f} ms "
            f"(init {fr['init_median_ms']:.1f} + invocation {fr['invocation_median_ms']:.1f})"
        )
        top = ", ".join(f"{p['package']} {p['cumulative_ms']:.0f}" for p in imports["packages"][:4])
        lines.append(
            f"  {'':<20} importtime: +{imports['added_ms']:.0f} ms over the floor's imports "
            f"({imports['added_modules']} modules): {top}"
        )
    lines.append(f"  budget: init <= {result['budget']}x floor (docs/design.md#budgets)")
    return "\n".join(lines)


def _init_table(result: dict[str, Any]) -> list[str]:
    budget, heading = result["budget"], result["heading"]
    rows = [
        "| program | median ms | p90 ms | × floor | × floor above the interpreter | verdict "
        "| × floor, round by round |",
        "|---|---:|---:|---:|---:|---|---|",
        f"| interpreter alone (`pass`) | {result['interpreter']['median_ms']:.1f} | "
        f"{result['interpreter']['p90_ms']:.1f} | | | | |",
    ]
    for floor in result["floors"].values():
        rows.append(
            f"| floor: `import boto3` + {', '.join(floor['clients'])} clients | "
            f"{floor['median_ms']:.1f} | {floor['p90_ms']:.1f} | 1.00 | 1.00 | | |"
        )
    for name, row in result["handlers"].items():
        floor = result["floors"][row["floor"]]["samples_ms"]
        per_round = [h / f for h, f in zip(row["init"]["samples_ms"], floor, strict=True)]
        low, _, high = statistics.quantiles(per_round, n=4) if len(per_round) > 1 else [0, 0, 0]
        rows.append(
            f"| `{name}` init | {row['init']['median_ms']:.1f} | {row['init']['p90_ms']:.1f} | "
            f"**{row['ratio_to_floor']:.2f}** | {row['ratio_above_interpreter']:.2f} | "
            f"{_verdict(row['ratio_to_floor'], budget, heading)} | {low:.2f}–{high:.2f} |"
        )
    return rows


def _first_table(result: dict[str, Any]) -> list[str]:
    rows = [
        "| handler | first event | first response ms (median) | p90 | of which init | "
        "first invocation | tokenizer loaded |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name, row in result["handlers"].items():
        fr = row["first_response"]
        rows.append(
            f"| `{name}` | {fr['event']} | {fr['median_ms']:.1f} | {fr['p90_ms']:.1f} | "
            f"{fr['init_median_ms']:.1f} | {fr['invocation_median_ms']:.1f} | "
            f"{'yes' if fr['tokenizer_loaded'] else 'no'} |"
        )
    return rows


def _packages_table(result: dict[str, Any]) -> list[str]:
    names = list(result["handlers"])
    cells: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for name in names:
        for row in result["handlers"][name]["imports"]["packages"]:
            cells[row["package"]][name] = row
    order = sorted(cells, key=lambda p: -max(r["cumulative_ms"] for r in cells[p].values()))
    head = " | ".join(f"`{n}` cumulative / self ms" for n in names)
    rows = [f"| package | {head} |", "|---|" + "---:|" * len(names)]
    for package in order:
        parts = [
            f"{cells[package][n]['cumulative_ms']:.1f} / {cells[package][n]['self_ms']:.1f}"
            if n in cells[package]
            else "–"
            for n in names
        ]
        rows.append(f"| {package} | " + " | ".join(parts) + " |")
    summary = [
        ("all imports", "import_ms"),
        ("the floor's imports", "floor_import_ms"),
        ("added over the floor (modules it does not import)", "added_ms"),
        ("app.py module body (settings, clients, router)", "app_body_ms"),
    ]
    for label, key in summary:
        values = " | ".join(f"{result['handlers'][n]['imports'][key]:.1f}" for n in names)
        rows.append(f"| *{label}* | {values} |")
    return rows


def _own_table(name: str, own: dict[str, Any]) -> list[str]:
    rows = [
        f"`{name}`: {own['package']} costs {own['total_ms']:.1f} ms in {own['modules']} modules "
        f"({own['self_ms']:.1f} ms of its own code, the rest what it imports beyond the floor).",
        "",
        "| module | total ms | self ms | pulls in (ms) | mostly |",
        "|---|---:|---:|---:|---|",
    ]
    for sub in own["submodules"]:
        rows.append(
            f"| {sub['module']} | {sub['total_ms']:.1f} | {sub['self_ms']:.1f} | "
            f"{sub['pulls_in_ms']:.1f} | {', '.join(sub['pulls_in']) or '–'} |"
        )
    return rows


def _imports_summary(result: dict[str, Any]) -> str:
    """A sentence or two read from the breakdown: what dominates, and whether any module
    of our own is heavy enough to be worth deferring."""
    handlers = result["handlers"]
    totals: dict[str, float] = defaultdict(float)
    for row in handlers.values():
        for package in row["imports"]["packages"]:
            if package["package"] != OWN_PACKAGE:
                totals[package["package"]] += package["cumulative_ms"]
    top = sorted(totals, key=lambda p: -totals[p])[:3]
    own: dict[str, float] = {}  # the same module's code costs the same in every handler
    for row in handlers.values():
        for sub in row["imports"]["own_package"]["submodules"]:
            own[sub["module"]] = min(own.get(sub["module"], sub["self_ms"]), sub["self_ms"])
    heaviest = max(own, key=lambda module: own[module])
    text = (
        f"Beyond the floor, the handlers import mostly {', '.join(top)}. "
        f"The heaviest module of {OWN_PACKAGE} by its own time is `{heaviest}` "
        f"({own[heaviest]:.1f} ms, the least over the handlers that import it); the rest of "
        f"{OWN_PACKAGE}'s cost is what its modules import first (the `pulls in` column)."
    )
    if own[heaviest] < HEAVY_MS:
        text += (
            f" No module of our own costs {HEAVY_MS:.0f} ms or more by itself, and what they "
            "pull in (pydantic for settings, jobs and API schemas; Powertools for the router "
            "and batch processing) is used at init, so deferring it would only move the cost "
            "into the first response."
        )
    return text


def _plots(result: dict[str, Any], img_dir: Path) -> list[str]:
    names = list(result["handlers"])
    floors = result["floors"]
    groups = ["interpreter", *(f"floor ({k})" for k in floors), *names]
    values = [
        result["interpreter"]["median_ms"],
        *(f["median_ms"] for f in floors.values()),
        *(result["handlers"][n]["init"]["median_ms"] for n in names),
    ]
    hline = None
    if len(floors) == 1:
        limit = result["budget"] * next(iter(floors.values()))["median_ms"]
        hline = (limit, f"budget: {result['budget']}× floor = {limit:.0f} ms")
    bars(
        img_dir / "cold_start-init.png",
        "Cold start: fresh interpreter to ready (median)",
        "ms",
        groups,
        {"init (import, clients built)": values},
        hline=hline,
    )
    packages: list[str] = []
    for n in names:
        for row in result["handlers"][n]["imports"]["packages"][:6]:
            if row["package"] not in packages:
                packages.append(row["package"])
    series = {
        n: [
            next(
                (
                    r["cumulative_ms"]
                    for r in result["handlers"][n]["imports"]["packages"]
                    if r["package"] == p
                ),
                0.0,
            )
            for p in packages
        ]
        for n in names
    }
    bars(
        img_dir / "cold_start-imports.png",
        "-X importtime: what each handler imports beyond the floor (cumulative)",
        "ms (under -X importtime)",
        packages,
        series,
    )
    return [
        "![cold start per handler against the floor](img/cold_start-init.png)",
        "",
        "![import cost added over the floor, by package](img/cold_start-imports.png)",
    ]


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    handlers = result["handlers"]
    worst = max(handlers, key=lambda n: handlers[n]["ratio_to_floor"])
    floors = result["floors"]
    floor_note = (
        f"All handlers build the same clients ({', '.join(next(iter(floors.values()))['clients'])}"
        "; read from each handler's `runtime.clients` after import), so one floor serves all."
        if len(floors) == 1
        else "Handlers build different clients, so each is compared with its own floor."
    )
    parts = [
        f"Target: each handler's init ≤ **{result['budget']}×** the floor (`import boto3` plus "
        "the clients that handler builds). Each sample is a "
        "fresh interpreter timed from spawn to ready (teardown excluded); programs are "
        f"interleaved and the median of {result['rounds']} rounds is kept. {floor_note}",
        "",
        *_init_table(result),
        "",
        f"The highest ratio is `{worst}` at {handlers[worst]['ratio_to_floor']:.2f}× "
        f"({'within' if handlers[worst]['within_budget'] else 'over'} the budget). The last "
        "column is the spread of the ratio taken round by round (each handler sample over "
        "the floor sample of the same round, 25th to 75th percentile): how much of the "
        "distance to the budget is noise on this shared machine.",
        "",
        "**Process start to first response.** The same fresh interpreter, then one call of "
        "`lambda_handler` on the handler's ordinary event, against a moto server on "
        "127.0.0.1 in the benchmark process (offline models; every handler configured with "
        f"`HARNESS_EMBEDDING_MODEL={EMBEDDING_MODEL}`, as `make dev` runs it: the model "
        "loads on the first query, never at init). Loopback moto answers in about "
        "a millisecond where AWS takes several, so these are lower bounds; there is no budget "
        "for them. The last column says whether the first invocation loaded the tokenizer "
        "(tiktoken, read from the layer's file).",
        "",
        *_first_table(result),
        "",
        '**Where the time goes** (`python -X importtime -c "import functions.<name>.app"`, '
        f"least self time per module over {result['importtime_runs']} run(s); importtime "
        "itself slows imports, so compare rows, not with the wall-clock table). Packages the "
        "floor never imports, by cumulative time: the package's modules plus everything not "
        "in the floor that they import (so cumulative figures overlap: agent_harness includes "
        "the pydantic and Powertools modules it is first to import). A module's self time "
        "is whatever runs while it executes, including a garbage-collection pass that falls "
        "there, so the same module can cost more in one handler than in another.",
        "",
        *_packages_table(result),
        "",
    ]
    parts += [_imports_summary(result), ""]
    for name, row in handlers.items():
        parts += [*_own_table(name, row["imports"]["own_package"]), ""]
    parts += _plots(result, img_dir)
    return "\n".join(parts)
