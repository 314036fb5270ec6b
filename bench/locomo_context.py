"""LoCoMo end to end: is a question's evidence in the agent's input, and at what memory cost?

Each LoCoMo conversation becomes one user's memory through the product's own paths,
in-process on the in-memory fakes (``bench.locomo_memory``: every session imported, the
import's post-turn job flushing it with the session's LoCoMo observations as the memory
model's answer, a consolidation by the ``offline`` memory model after each session).

Then every question with evidence is sent as the first message of a new session, through
the real turn (``agent.turn.run_turn``), to an agent model that is the OpenAI provider on a
fake chat-completions endpoint (``httpx.MockTransport``) recording the request body and
answering a fixed reply. The arms:

    memory   MEMORY.md injected (capped at HARNESS_CONSOLIDATION_MAX_TOKENS), recall off
    recall   automatic recall only: MEMORY.md removed for the arm
    both     MEMORY.md and automatic recall of memory lines (recall skips lines MEMORY.md
             shows; past messages off)
    messages automatic recall with past messages (HARNESS_RECALL_MESSAGES), MEMORY.md
             removed: ledger lines and the imported sessions' messages alternate; both
             speakers' messages (HARNESS_RECALL_MESSAGE_ROLES=user,assistant: LoCoMo's
             two speakers are people, the import gives the second the assistant's role)
    shipped  MEMORY.md and automatic recall with past messages: the product's defaults
             (the user's own past messages only)

Scoring: an evidence turn (a dia_id) is in context when one line of the recorded input
(any message, whitespace collapsed) holds the whole text of an observation the dataset
links to that turn, or the turn's own message. A question counts when all its evidence
turns are in context ("any" is reported too). Memory tokens per call are the turn's
``memory_tokens`` (MEMORY.md plus the recall message, counted by the product).

The recall budget and floor are swept on the tuning conversations only; the settings
recommended from them (the best overall, and the best recalling memory lines only) are
the ones run on the held-out five.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agent_harness.settings import Settings
from bench.common import HELD_OUT, TUNING
from bench.locomo_memory import (
    RANK_CUTS,
    Row,
    ask,
    ceiling,
    evidence_ranks,
    key_of,
    parse_key,
    summarise,
)
from bench.locomo_retrieval import CATEGORIES, questions

if TYPE_CHECKING:
    from pathlib import Path

    from bench.locomo_memory import Memory
    from bench.locomo_retrieval import Question

TITLE = "LoCoMo in context: the evidence in a new session's first model call"
BUDGETS = (250, 500, 1000, 1500, 2000, 4000)
FLOORS = (0.0, 0.15, 0.3, 0.45)
#: the shipped HARNESS_RECALL_MAX_TOKENS and HARNESS_RECALL_MIN_SCORE, read from Settings
DEFAULT: tuple[int, float] = (
    Settings.model_fields["recall_max_tokens"].default,
    Settings.model_fields["recall_min_score"].default,
)
TARGET_SHARE, TARGET_TOKENS = 0.75, 2000
#: settings within this much evidence of the best count as equal; the cheapest wins
TIE = 0.01
QUICK_CONV, QUICK_QUESTIONS = "conv-30", 40
ARM_NAMES = {
    "memory": "MEMORY.md only",
    "recall": "automatic recall only",
    "both": "MEMORY.md and recall",
    "messages": "automatic recall with past messages",
    "shipped": "MEMORY.md and recall with past messages",
}
#: what an arm at the shipped budget and floor is, beside the product's defaults
DEFAULT_NOTES = {
    "shipped": "shipped default",
    "both": "the shipped budget and floor, past messages off",
    "recall": "the shipped budget and floor, MEMORY.md removed, past messages off",
    "messages": "the shipped budget and floor, MEMORY.md removed",
}

ARM_LABELS = {"recall": "recall only", "both": "both", "messages": "recall + messages"}
#: the arms a recommendation is chosen from: recall alone, without and with messages
ALONE = ("recall", "messages")

# -- the recommendation ----------------------------------------------------------------


def _arm(key: str) -> str:
    """A row's arm (``memory``, ``recall``, ...), or what else it is (``ceiling``, ``top``)."""
    return key.split()[0]


def recommend(
    table: dict[str, dict[str, dict[str, Any]]], arms: tuple[str, ...] = ALONE
) -> str | None:
    """From the tuning sweep: the settings of ``arms`` whose every call stays within the
    target's memory tokens; of those within ``TIE`` of the best evidence share, the one
    with the fewest memory tokens per call on average."""
    fits = {
        k: v["all"]
        for k, v in table.items()
        if _arm(k) in arms and v["all"]["tokens_max"] <= TARGET_TOKENS
    }
    if not fits:
        return None
    best = max(v["all"] for v in fits.values())
    near = [k for k, v in fits.items() if v["all"] >= best - TIE]
    return min(near, key=lambda k: (fits[k]["tokens_mean"], k))


# -- the benchmark ---------------------------------------------------------------------


def sweep_keys(quick: bool) -> list[str]:
    if quick:
        arms = ("memory", "shipped", "both", "recall", "messages")
        return [key_of(arm, *DEFAULT) for arm in arms]
    keys = [key_of("memory"), key_of("shipped", *DEFAULT)]
    for arm in ("both", *ALONE):  # the arms without MEMORY.md last: they remove it
        keys += [key_of(arm, b, f) for f in FLOORS for b in BUDGETS]
    return keys


def held_out_keys(chosen: str, lines: str) -> list[str]:
    """On the held-out five: the arms at the shipped default, MEMORY.md with recall at
    the setting recommended for memory lines alone (``lines``), and each recall-alone
    arm at its recommended floor and every budget (the curves of the plot)."""
    _, budget, floor = parse_key(lines)
    keys = [key_of("memory"), key_of("shipped", *DEFAULT), key_of("both", budget, floor)]
    keys.append(key_of("both", *DEFAULT))
    # the arms without MEMORY.md last: they remove it
    keys += [key_of("recall", b, floor) for b in BUDGETS]
    keys.append(key_of("recall", *DEFAULT))
    arm, _, chosen_floor = parse_key(chosen)
    if arm == "messages":
        keys += [key_of("messages", b, chosen_floor) for b in BUDGETS]
    keys.append(key_of("messages", *DEFAULT))
    return list(dict.fromkeys(keys))


def _build(conv: str, counter: Any, built: dict[str, dict[str, Any]]) -> Memory:
    from bench.locomo_memory import build_memory

    memory = build_memory(conv, counter)
    built[conv] = {
        "sessions": memory.sessions,
        "consolidations": memory.consolidations,
        "observations": memory.flushed,
        "kept": memory.kept,
        "ledger_days": memory.ledger_days,
        "archived_days": memory.archived_days,
        "memory_md_tokens": memory.memory_tokens(),
        "seconds": round(memory.seconds, 2),
    }
    return memory


def run(quick: bool = False) -> dict[str, Any]:
    from agent_harness.tokens import TokenCounter

    counter = TokenCounter()
    built: dict[str, dict[str, Any]] = {}
    rows: list[Row] = []
    timing: dict[str, float] = {"build": 0.0, "tuning": 0.0, "held_out": 0.0}
    tuning = (QUICK_CONV,) if quick else TUNING
    turns = 0

    def run_conversation(conv: str, items: list[Question], keys: list[str], split: str) -> None:
        nonlocal turns
        started = time.perf_counter()
        memory = _build(conv, counter, built)
        asked = time.perf_counter()
        rows.extend(ceiling(memory, items))
        rows.extend(evidence_ranks(memory, items))
        for key in keys:
            rows.extend(ask(memory, key, items))
            turns += len(items)
        timing["build"] += asked - started
        timing[split] += time.perf_counter() - asked

    for conv in tuning:
        items = questions(conv)[:QUICK_QUESTIONS] if quick else questions(conv)
        run_conversation(conv, items, sweep_keys(quick), "tuning")
    table = summarise(rows, tuning)
    chosen = recommend(table) or key_of("recall", *DEFAULT)
    lines = recommend(table, ("recall",)) or key_of("recall", *DEFAULT)
    held_out: tuple[str, ...] = () if quick else HELD_OUT
    for conv in held_out:
        run_conversation(conv, questions(conv), held_out_keys(chosen, lines), "held_out")
    return {
        "quick": quick,
        "tuning_conversations": list(tuning),
        "held_out_conversations": list(held_out),
        "budgets": list(BUDGETS),
        "floors": list(FLOORS),
        "default": list(DEFAULT),
        "target": {"share": TARGET_SHARE, "tokens": TARGET_TOKENS},
        "consolidation_max_tokens": _setting("consolidation_max_tokens"),
        "recall_candidates": _candidates(),
        "recommended": chosen,
        "recommended_lines": lines,
        "built": built,
        "turns": turns,
        "seconds": {k: round(v, 1) for k, v in timing.items()},
        "tuning": table,
        "held_out": summarise(rows, held_out) if held_out else {},
    }


def _candidates() -> str:
    from agent_harness.memory.recall import LINE_TOKENS, MIN_CANDIDATES

    return f"the {MIN_CANDIDATES} best-ranked lines (budget / {LINE_TOKENS} if more)"


def _setting(name: str) -> Any:
    from bench.locomo_memory import base_settings

    return getattr(base_settings(), name)


# -- the report ------------------------------------------------------------------------


def _label(key: str) -> str:
    arm, budget, floor = parse_key(key)
    if arm == "memory":
        return ARM_NAMES[arm]
    return f"{ARM_NAMES[arm]}, budget {budget:,}, floor {floor:g}"


def _cell(stats: dict[str, Any] | None) -> str:
    return f"{stats['all']:.3f} ({stats['any']:.3f})" if stats else "–"


def _verdict(result: dict[str, Any]) -> str:
    chosen, held = result["recommended"], result["held_out"]
    if not held or chosen not in held:
        return "Held-out not run (quick mode)."
    stats = held[chosen]["all"]
    share_ok = stats["all"] >= result["target"]["share"]
    tokens_ok = stats["tokens_max"] <= result["target"]["tokens"]
    verdict = "meets" if share_ok and tokens_ok else "misses"
    return (
        f"**Held-out, {_label(chosen)}** (chosen on the tuning five): evidence in context for "
        f"{stats['all']:.3f} of questions (any evidence: {stats['any']:.3f}) at "
        f"{stats['tokens_mean']:,} memory tokens per call on average, {stats['tokens_max']:,} "
        f"at most; this {verdict} the target (≥ {result['target']['share']} at ≤ "
        f"{result['target']['tokens']:,} tokens). The ceiling of memory lines, every "
        f"evidence turn with an observation in memory, is {held['ceiling']['all']['all']:.3f}"
        + (
            "; past messages hold every turn's own message, so recall with them is not bound by it."
            if parse_key(chosen)[0] == "messages"
            else "."
        )
    )


def _lines_choice(result: dict[str, Any]) -> str:
    """The setting recommended for recalling memory lines alone (no past messages)."""
    return str(result.get("recommended_lines") or result["recommended"])


def _main_keys(result: dict[str, Any]) -> list[str]:
    """The rows of the summary: the ceiling, each arm at the default and the chosen
    settings (the best overall, the best for memory lines alone and it with MEMORY.md)."""
    lines = _lines_choice(result)
    _, budget, floor = parse_key(lines)
    default = result["default"]
    keys = ["ceiling", key_of("memory"), key_of("shipped", *default)]
    keys += [key_of("recall", *default), key_of("both", *default), key_of("messages", *default)]
    keys += [lines, key_of("both", budget, floor)]
    return list(dict.fromkeys([*keys, result["recommended"]]))


def report(result: dict[str, Any]) -> str:
    s = result["seconds"]
    lines = [
        f"LoCoMo in context: {result['turns']} turns in-process (build {s['build']} s, "
        f"tuning {s['tuning']} s, held-out {s['held_out']} s); all evidence in context "
        "(any), mean memory tokens per call",
        f"  {'setting':<64}{'tuning':>15}{'tokens':>8}{'held-out':>15}{'tokens':>8}",
    ]
    for key in _main_keys(result):
        t = result["tuning"].get(key, {}).get("all")
        h = result["held_out"].get(key, {}).get("all")
        label = "ceiling" if key == "ceiling" else _label(key)
        lines.append(
            f"  {label:<64}{_cell(t):>15}{(t or {}).get('tokens_mean', ''):>8}"
            f"{_cell(h):>15}{(h or {}).get('tokens_mean', ''):>8}"
        )
    lines.append("  " + _verdict(result).replace("**", ""))
    return "\n".join(lines)


def _sweep_table(table: dict[str, Any], arm: str, result: dict[str, Any]) -> list[str]:
    budgets = result["budgets"]
    out = [
        "| floor | " + " | ".join(f"{b:,}" for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for floor in result["floors"]:
        cells = []
        for budget in budgets:
            stats = table.get(key_of(arm, budget, floor), {}).get("all")
            mark = "**" if key_of(arm, budget, floor) == result["recommended"] else ""
            cells.append(
                f"{mark}{stats['all']:.3f} · {stats['tokens_mean']:,}{mark}" if stats else "–"
            )
        out.append(f"| {floor:g} | " + " | ".join(cells) + " |")
    return out


def markdown(result: dict[str, Any], img_dir: Path) -> str:
    tuning, held = result["tuning"], result["held_out"]
    chosen = result["recommended"]
    floor = parse_key(chosen)[2]
    cap = result["consolidation_max_tokens"]
    parts = [
        "Is the evidence of a LoCoMo question in what the agent model receives, when the "
        "question opens a new session, and how many memory tokens does that take per call? "
        f"Tuning conversations: {', '.join(result['tuning_conversations'])}; held out: "
        f"{', '.join(result['held_out_conversations']) or 'none (quick run)'} (never looked "
        "at while choosing a setting). Target on the held-out five: evidence in context for "
        f"at least {result['target']['share']} of questions at no more than "
        f"{result['target']['tokens']:,} memory tokens per call.",
        "",
        "**How the memory is built** (in-process, on the in-memory fakes the unit tests use: "
        "the same services, no AWS, no HTTP). Each conversation is one user. Every LoCoMo "
        "session is imported as a session (the importer, the first speaker as `user`, each "
        "message with the speaker's name and the session's date); the import's post-turn "
        "job indexes it and flushes it, the whole session in one memory-model call, into "
        "the ledger of its day. The memory model's flush answer is the session's LoCoMo "
        "observations: facts the dataset's authors generated from that session, standing "
        "in for what an LLM would extract; the flush's own checks, de-duplication and "
        "source line apply to them. After each session a consolidation runs with the "
        "`offline` memory model, and that is what writes MEMORY.md. The offline model is "
        "not an LLM: it merges by de-duplication, so MEMORY.md keeps every observation, "
        "oldest first, and nothing is condensed. It is injected capped at "
        f"{cap:,} tokens (`HARNESS_CONSOLIDATION_MAX_TOKENS`, head and tail kept), so "
        "where it is longer the middle sessions are only reachable through recall.",
        "",
        "**How a question is asked**: as the first message of a new session, through the "
        "real turn code, to the OpenAI provider on a fake chat-completions endpoint "
        "(`httpx.MockTransport`) that records the request body and replies with a fixed "
        "text, no tool call (so one model call per question). Arms: *MEMORY.md only* "
        "(`HARNESS_RECALL_MAX_TOKENS=0`); *automatic recall only* (MEMORY.md removed); "
        "*both* (recall skips lines the injected MEMORY.md already shows); *automatic "
        "recall with past messages* (MEMORY.md removed: the ledger lines alternate with "
        "the imported sessions' messages, each best first; the question's own new "
        "session is left out; both speakers' messages, `HARNESS_RECALL_MESSAGE_ROLES="
        "user,assistant`: LoCoMo's two speakers are people, and the import gives the "
        "second the assistant's role); *MEMORY.md and recall with past messages*, the "
        "product's defaults (the user's own past messages only). *Automatic recall only* "
        "and *both* recall memory lines only "
        "(`HARNESS_RECALL_MESSAGES=false`). Memory tokens "
        "per call are the turn's `memory_tokens` (MEMORY.md plus the recall message, "
        "as the product counts them).",
        "",
        "**Scoring**: an evidence turn is in context when one line of the recorded input "
        "holds, whitespace collapsed, the whole text of an observation the dataset links "
        "to that turn, or the turn's own message. A question counts when all its evidence "
        "turns are in context; the share with at least one is given in brackets. Every "
        "question whose evidence names a real turn counts (adversarial ones too). "
        "Observations exist for only some turns, so no arm of memory lines can pass the "
        "*ceiling*: the share of questions whose every evidence turn has an observation "
        "in memory. Past messages hold every turn's own message, so recall with them is "
        "not bound by it.",
        "",
        _verdict(result),
        "",
        "| setting | tuning: in context (any) | tokens per call, mean / max | held-out: in "
        "context (any) | tokens per call, mean / max |",
        "|---|---|---|---|---|",
    ]
    for key in _main_keys(result):
        cells = []
        for table in (tuning, held):
            stats = table.get(key, {}).get("all")
            cells.append(_cell(stats))
            if key == "ceiling" or not stats:
                cells.append("–")
            else:
                cells.append(f"{stats['tokens_mean']:,} / {stats['tokens_max']:,}")
        name = "ceiling (evidence with observations)" if key == "ceiling" else _label(key)
        if key == chosen:
            name += " (recommended)"
        elif key == _lines_choice(result):
            name += " (recommended without past messages)"
        elif parse_key(key)[1:] == tuple(result["default"]) and key != "memory":
            name += f" ({DEFAULT_NOTES[parse_key(key)[0]]})"
        parts.append(f"| {name} | " + " | ".join(cells) + " |")
    parts += [
        "",
        "The sweep, tuning conversations: evidence in context (all of a question's) · mean "
        "memory tokens per call, by recall floor (`HARNESS_RECALL_MIN_SCORE`, rows) and "
        "budget (`HARNESS_RECALL_MAX_TOKENS`, columns). The recommended setting, in bold, is "
        "chosen by rule: of the settings of recall alone (with or without past messages; "
        "without them for the other recommendation) whose every call stays within "
        f"{result['target']['tokens']:,} memory tokens, those within {TIE} of the best "
        "share, the one with the fewest tokens per call. " + _sweep_notes(result),
        "",
        "*Automatic recall only:*",
        "",
        *_sweep_table(tuning, "recall", result),
        "",
        "*MEMORY.md and recall:*",
        "",
        *_sweep_table(tuning, "both", result),
        "",
        "*Automatic recall with past messages (`HARNESS_RECALL_MESSAGES=true`; MEMORY.md "
        "removed):*",
        "",
        *_sweep_table(tuning, "messages", result),
    ]
    for arm, at in (("recall", parse_key(_lines_choice(result))[2]), ("messages", floor)):
        rows = [(b, held.get(key_of(arm, b, at), {}).get("all")) for b in result["budgets"]]
        if not any(stats for _, stats in rows):
            continue
        parts += [
            "",
            f"Held-out, {ARM_NAMES[arm]} at floor {at:g}, by budget:",
            "",
            "| budget | in context (any) | tokens per call, mean / max |",
            "|---|---|---|",
        ]
        parts += [
            f"| {b:,} | {_cell(stats)} | {stats['tokens_mean']:,} / {stats['tokens_max']:,} |"
            for b, stats in rows
            if stats
        ]
    parts += _ranks(result)
    parts += _categories(result)
    parts += _built(result)
    path = plot(result, img_dir / "locomo_context-tokens.png")
    parts += ["", f"![evidence in context against memory tokens]({img_dir.name}/{path.name})"]
    return "\n".join(parts)


def _ranks(result: dict[str, Any]) -> list[str]:
    """How deep recall's ranking puts the evidence, against how many lines a call holds."""
    tuning, held = result["tuning"], result["held_out"]
    chosen = _lines_choice(result)
    shown = (held or tuning).get(chosen, {}).get("all", {}).get("lines_mean")
    out = [
        "",
        "**Where recall's ranking puts the evidence.** For each question, recall's own "
        "ranking of the ledgers (`ranked`, the question as query, no budget): the share of "
        "questions whose evidence turns all have an observation among the N best lines "
        "(some, in brackets). No budget recalls a line ranked below what it holds: "
        f"{_label(chosen)} shows {shown} lines per call on average"
        + (" (held-out)." if held else " (tuning)."),
        "",
        "| best lines | tuning: all (any) | held-out: all (any) |",
        "|---|---|---|",
    ]
    for cut in RANK_CUTS:
        key = f"top {cut}"
        out.append(
            f"| {cut} | {_cell(tuning.get(key, {}).get('all'))} | "
            f"{_cell(held.get(key, {}).get('all'))} |"
        )
    out.append(
        f"| every line (the ceiling) | {_cell(tuning.get('ceiling', {}).get('all'))} | "
        f"{_cell(held.get('ceiling', {}).get('all'))} |"
    )
    return [*out, "", _depth_needed(result)]


def _depth_needed(result: dict[str, Any]) -> str:
    """How many lines, and so how many tokens, the target share would take with this
    ranking: the first cut whose share reaches it, at the recommended setting's tokens
    per recalled line."""
    table = result["held_out"] or result["tuning"]
    which = "held-out" if result["held_out"] else "tuning"
    stats = table.get(_lines_choice(result), {}).get("all") or {}
    if not stats.get("lines_mean"):
        return ""
    per_line = stats["tokens_mean"] / stats["lines_mean"]
    target = result["target"]["share"]
    reached = [
        c for c in RANK_CUTS if table.get(f"top {c}", {}).get("all", {}).get("all", 0) >= target
    ]
    if not reached:
        return (
            f"On the {which} conversations no depth up to {RANK_CUTS[-1]} lines holds all the "
            f"evidence of {target} of questions: the target is out of this ranking's reach at "
            "any budget."
        )
    depth = reached[0]
    tokens = depth * per_line
    return (
        f"On the {which} conversations the evidence of {target} of questions is first all "
        f"within the best {depth} lines (of the depths above); at {per_line:.0f} tokens a "
        "recalled line that is "
        f"about {tokens:,.0f} tokens of recall, {tokens / result['target']['tokens']:.1f}× "
        "the target's budget: with memory lines alone the target is bound by the ranking "
        "(which lines come first), not by how the budget is spent."
    )


def _sweep_notes(result: dict[str, Any]) -> str:
    """What the sweep shows about the budget and the floor, read off the numbers."""
    recall = {k: v["all"] for k, v in result["tuning"].items() if _arm(k) in ALONE}
    over = [v["tokens_max"] - parse_key(k)[1] for k, v in recall.items()]
    widest = max((v["tokens_max"] for v in recall.values()), default=0)
    most = max(over, default=0)
    frame = (
        "The budget covers the whole recall message, its frame (intro and tags) included: "
        "no call went over it. "
        if most <= 0
        else "The budget counts the recalled lines; the recall message's frame (its intro "
        f"and tags) comes on top, up to {most} tokens over the budget here. "
    )
    return (
        frame + f"Recall considers {result.get('recall_candidates', '–')} and the largest "
        f"call took {widest:,} recall tokens. "
        "The floor is there to inject nothing when memory does not bear on a message; "
        "every question here has evidence, so this bench shows what a floor costs, not "
        "what it saves on messages memory cannot answer."
    )


def _categories(result: dict[str, Any]) -> list[str]:
    split = "held_out" if result["held_out"] else "tuning"
    table = result[split]
    lines = _lines_choice(result)
    _, budget, floor = parse_key(lines)
    keys = ["ceiling", key_of("memory"), lines, key_of("both", budget, floor)]
    head = "| category | n | ceiling | MEMORY.md only | recall, lines only | both |"
    if result["recommended"] != lines:
        keys.append(result["recommended"])
        head += f" {ARM_LABELS[parse_key(result['recommended'])[0]]} |"
    out = [
        "",
        f"By LoCoMo category ({split.replace('_', '-')} conversations; evidence in context, "
        "all of a question's; each recall arm at its recommended setting):",
        "",
        head,
        "|---" * (len(keys) + 2) + "|",
    ]
    for cat, name in CATEGORIES.items():
        cells = [table.get(k, {}).get(str(cat)) for k in keys]
        n = cells[0]["n"] if cells[0] else 0
        out.append(
            f"| {name} ({cat}) | {n} | "
            + " | ".join(f"{c['all']:.3f}" if c else "–" for c in cells)
            + " |"
        )
    return out


def _built(result: dict[str, Any]) -> list[str]:
    out = [
        "",
        "The memories (observations: distinct LoCoMo observations the flush was given, and "
        "those the ledgers hold after its checks; ledgers older than the retention are in "
        "memory/archive/, still searched):",
        "",
        "| conversation | sessions | observations (kept) | ledger days (archived) | "
        "MEMORY.md tokens | built in |",
        "|---|---|---|---|---|---|",
    ]
    for conv, b in result["built"].items():
        out.append(
            f"| {conv} | {b['sessions']} | {b['observations']} ({b['kept']}) | "
            f"{b['ledger_days']} ({b['archived_days']}) | {b['memory_md_tokens']:,} | "
            f"{b['seconds']} s |"
        )
    s = result["seconds"]
    out += [
        "",
        f"{result['turns']:,} turns in all: building the memories took {s['build']} s, "
        f"the tuning sweep {s['tuning']} s, the held-out runs {s['held_out']} s.",
    ]
    return out


def plot(result: dict[str, Any], path: Path) -> Path:
    """Evidence in context against mean memory tokens per call: the tuning sweep (one
    line per floor and arm), MEMORY.md alone, the held-out curve at the chosen floor."""
    import matplotlib.pyplot as plt

    from bench import plots  # noqa: F401 - selects the headless backend

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    tuning, held = result["tuning"], result["held_out"]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, floor in enumerate(result["floors"]):
        for arm, style in (("recall", "-"), ("both", ":"), ("messages", "-.")):
            points = [tuning.get(key_of(arm, b, floor), {}).get("all") for b in result["budgets"]]
            points = [p for p in points if p]
            if points:
                ax.plot(
                    [p["tokens_mean"] for p in points],
                    [p["all"] for p in points],
                    style,
                    marker="o",
                    markersize=3,
                    color=colours[n % len(colours)],
                    label=f"tuning, {ARM_LABELS[arm]}, floor {floor:g}",
                )
    for name, table, marker in (("tuning", tuning, "s"), ("held-out", held, "D")):
        stats = table.get("memory", {}).get("all")
        if stats:
            ax.plot(
                stats["tokens_mean"], stats["all"], marker, color="black",
                label=f"{name}, MEMORY.md only",
            )  # fmt: skip
    for key, colour in ((_lines_choice(result), "black"), (result["recommended"], "tab:purple")):
        arm, _, floor = parse_key(key)
        points = [held.get(key_of(arm, b, floor), {}).get("all") for b in result["budgets"]]
        points = [p for p in points if p]
        if points and arm in ALONE:
            ax.plot(
                [p["tokens_mean"] for p in points], [p["all"] for p in points], "--",
                marker="D", markersize=4, color=colour,
                label=f"held-out, {ARM_LABELS[arm]}, floor {floor:g}",
            )  # fmt: skip
    for name, table, style in (("tuning", tuning, ":"), ("held-out", held, "--")):
        top = table.get("ceiling", {}).get("all")
        if top:
            ax.axhline(top["all"], color="tab:olive", linestyle=style, linewidth=1,
                       label=f"ceiling of memory lines, {name}")  # fmt: skip
    target = result["target"]
    ax.axhline(target["share"], color="grey", linestyle="--", linewidth=1, label="target share")
    ax.axvline(target["tokens"], color="grey", linestyle="-.", linewidth=1, label="target tokens")
    ax.set_xscale("log")
    ticks = [125, 250, 500, 1000, 2000, 4000]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.set(
        title="LoCoMo: evidence in context against memory tokens per call",
        xlabel="memory tokens per call (mean, log scale)",
        ylabel="questions with all evidence in context",
        ylim=(0.3, 0.95),
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
