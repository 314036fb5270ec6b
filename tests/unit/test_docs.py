"""The documentation stands on its own and matches the tree.

* No text file cites a document that is not in the repository (a design brief, a spec's
  numbered sections, issue or case numbers, numbered invariants): cite
  ``docs/design.md#<anchor>`` instead, or say what is meant in a few words.
* Every ``docs/<name>.md`` and ``docs/<name>.md#<anchor>`` named anywhere (code comments
  included), and every relative link of README.md and docs/*.md, resolves: the file exists
  and the anchor is the GitHub slug of one of its headings.
* README.md is a short page that names the two commands, and CI runs its test command.
* The repository layout drawn in docs/design.md is the tree (see ``layout_block``).
* Every setting and every route is documented where the docs say it is.

Files are those git knows or would add (``git ls-files --cached --others
--exclude-standard``), so nothing ignored (venvs, caches) is read; no network is used.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
DESIGN = DOCS / "design.md"
PACKAGE = ROOT / "layers" / "agent_harness" / "agent_harness"

TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".js", ".html", ".css", ".json"}
TEXT_NAMES = {"Makefile"}
#: data, not prose: saved benchmark results and recorded provider answers
NOT_PROSE = ("bench/results/", "tests/fixtures/", "docs/img/")
#: this file spells out the patterns it looks for
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

#: citations of documents outside the repository, each with what it catches
CITATIONS = [
    (re.compile(r"\bDESIGN\b"), "the design brief (cite docs/design.md#<anchor>)"),
    (re.compile(r"§"), "a numbered section of an outside document"),
    (re.compile(r"\bspec(?:ification)?\s+§?\d", re.IGNORECASE), "a spec's section"),
    (re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\bcases?\s+#?\d+[a-z]?\b(?!\s*:)", re.IGNORECASE), "a spec's case number"),
    (re.compile(r"\bB\d{1,2}\b"), "a numbered weakness of the reference"),
    (re.compile(r"\barchitecture(?:\.md)?,?\s+item\s+\d+", re.IGNORECASE), "a numbered item"),
    (re.compile(r"\(item \d+\)"), "a numbered item"),
    (re.compile(r"\binvariants?\s+\d", re.IGNORECASE), "a numbered invariant (use its name)"),
    (re.compile(r"(?<![\w.&/\-])#\d{1,3}[a-z]?\b"), "a numbered case or issue (#85)"),
    (re.compile(r"\s#\s*\d{1,3}[a-z]?\s*$"), "a bare case number as a comment"),
    (re.compile(r"\.\./shared|/work/shared|\bshared/(?:DESIGN|reference|eval)\b"), "../shared"),
    (re.compile(r"agentscope-memory-spec|reference/[\w-]+\.md"), "the reference's spec file"),
]

DOC_MENTION = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


@cache
def repository_files() -> tuple[str, ...]:
    """Paths (relative, posix) of the files git tracks or would add, that exist."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return tuple(sorted(p for p in set(listed) if (ROOT / p).is_file()))


def text_files() -> list[str]:
    return [
        p
        for p in repository_files()
        if (Path(p).suffix in TEXT_SUFFIXES or Path(p).name in TEXT_NAMES or p.startswith(".ci/"))
        and not p.startswith(NOT_PROSE)
        and p != SELF
    ]


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str, bool]]:
    """(number, line, inside a fenced code block) for each line of a Markdown text."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            out.append((number, line, True))
            continue
        out.append((number, line, fenced))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, lower case, punctuation dropped
    (letters, digits, ``_``, ``-`` and spaces stay), spaces to ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor of a Markdown file: heading slugs (a repeated one gets -1, -2, ...)
    and explicit ``<a id=...>`` anchors."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line, fenced in prose_lines(path.read_text(encoding="utf-8")):
        if fenced:
            continue
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def unresolved(target: Path, anchor: str | None) -> str | None:
    """Why ``target#anchor`` does not resolve, or None."""
    if not target.exists():
        return "no such file"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"no heading with anchor #{anchor} in {target.relative_to(ROOT).as_posix()}"
    return None


# -- no outside documents ---------------------------------------------------------------------


def test_no_file_cites_a_document_outside_the_repository() -> None:
    hits = []
    for path in text_files():
        for number, line in enumerate((ROOT / path).read_text(encoding="utf-8").splitlines(), 1):
            for pattern, what in CITATIONS:
                if pattern.search(line):
                    hits.append(f"{path}:{number}: {what}: {line.strip()[:120]}")
                    break
    assert not hits, "cite docs/design.md#<anchor> or say it in words:\n" + "\n".join(hits)


# -- every reference resolves -----------------------------------------------------------------


def test_every_docs_path_named_anywhere_resolves() -> None:
    broken = []
    for path in text_files():
        text = (ROOT / path).read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            for name, anchor in DOC_MENTION.findall(line):
                why = unresolved(DOCS / name, anchor or None)
                if why:
                    broken.append(
                        f"{path}:{number}: docs/{name}{'#' + anchor if anchor else ''}: {why}"
                    )
    assert not broken, "\n".join(broken)


def test_every_relative_link_of_the_markdown_pages_resolves() -> None:
    broken = []
    for page in markdown_files():
        for number, line, fenced in prose_lines(page.read_text(encoding="utf-8")):
            if fenced:
                continue
            for target in MD_LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file, _, anchor = target.partition("#")
                resolved = (page.parent / file).resolve() if file else page
                why = unresolved(resolved, anchor or None)
                if why:
                    rel = page.relative_to(ROOT).as_posix()
                    broken.append(f"{rel}:{number}: ({target}): {why}")
    assert not broken, "\n".join(broken)


def test_the_anchors_code_cites_exist_in_the_design() -> None:
    """The names the code and the other pages link to (a sample that must never go)."""
    wanted = {
        "data-flow",
        "workspace-layout",
        "invariants",
        "http-api",
        "models",
        "budgets",
        "where-the-reference-falls-short",
        "repository-layout",
        "no-lost-turn",
        "session-lease",
        "flush-once",
        "append-never-lost",
        "consolidation-safe",
        "failed-model-writes-nothing",
        "user-isolation",
        "bad-input-4xx",
        "forget-removes-all",
        "data-not-instructions",
    }
    assert wanted <= anchors(DESIGN), sorted(wanted - anchors(DESIGN))


# -- README -----------------------------------------------------------------------------------


def test_the_readme_is_a_short_page_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "make dev" in text and "make test" in text


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "make test" in README.read_text(encoding="utf-8")
    assert "make test" in [line.strip() for line in ci]


# -- the layout drawn in docs/design.md is the tree --------------------------------------------


def layout_block() -> list[tuple[str, str]]:
    """(path, what it owns) of each line of the first fenced block under
    ``## Repository layout`` in docs/design.md.

    The block is a tree drawn with indentation: each line is a path, then at least two
    spaces, then what it owns. A path ending in ``/`` is a directory; the lines indented
    deeper below it are inside it. A path may hold several segments
    (``functions/agent_call/app.py``)."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("\n## Repository layout\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```[^\n]*\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE)
    assert block, "docs/design.md#repository-layout has no fenced block"
    entries: list[tuple[str, str]] = []
    parents: list[tuple[int, str]] = []  # (indentation, directory path) of open directories
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name, _, owns = line.strip().partition("  ")
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = (parents[-1][1] if parents else "") + name
        entries.append((path, owns.strip()))
        if name.endswith("/"):
            parents.append((indent, path))
    return entries


def defines_something(path: Path) -> bool:
    """A package ``__init__.py`` that holds more than a docstring and imports."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(
        not isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        for node in body
    )


def test_every_path_the_layout_shows_exists_and_says_what_it_owns() -> None:
    missing = [p for p, _ in layout_block() if not (ROOT / p.rstrip("/")).exists()]
    wrong_kind = [p for p, _ in layout_block() if p.endswith("/") and (ROOT / p).is_file()] + [
        p for p, _ in layout_block() if not p.endswith("/") and (ROOT / p).is_dir()
    ]
    unexplained = [p for p, owns in layout_block() if not owns]
    assert not missing, f"shown in docs/design.md#repository-layout but not in the tree: {missing}"
    assert not wrong_kind, f"directories end with '/', files do not: {wrong_kind}"
    assert not unexplained, f"say what each path owns: {unexplained}"


def test_the_layout_shows_every_top_level_entry_module_and_function() -> None:
    shown = {p.rstrip("/") for p, _ in layout_block()}
    top_level = {p.split("/")[0] for p in repository_files()}
    modules = {
        p.relative_to(ROOT).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts and (p.name != "__init__.py" or defines_something(p))
    }
    apps = {p.relative_to(ROOT).as_posix() for p in (ROOT / "functions").glob("*/app.py")}
    unshown_top = sorted(
        e for e in top_level if e not in shown and not any(s.startswith(e + "/") for s in shown)
    )
    unshown = sorted((modules | apps) - shown)
    assert not unshown_top, f"add to docs/design.md#repository-layout: {unshown_top}"
    assert not unshown, f"add to docs/design.md#repository-layout (one line each): {unshown}"


# -- settings and routes are documented ---------------------------------------------------------


def documented_variables(text: str) -> set[str]:
    """Variable names in a page; ``A_B_C`` / ``_D`` (or ``_C_D``) also names the variable
    with its last segments replaced (``A_B_D``)."""
    names: set[str] = set()
    for match in re.finditer(r"`([A-Z][A-Z0-9_]+)`((?:\s*/\s*`_[A-Z0-9_]+`)*)", text):
        full = match.group(1)
        names.add(full)
        for suffix in re.findall(r"`_([A-Z0-9_]+)`", match.group(2)):
            parts = suffix.split("_")
            names.add("_".join(full.split("_")[: -len(parts)] + parts))
    return names


def test_every_setting_is_documented_in_the_configuration_page() -> None:
    from agent_harness.settings import ENV

    documented = documented_variables((DOCS / "configuration.md").read_text(encoding="utf-8"))
    assert sorted(set(ENV.values()) - documented) == []


def test_every_route_of_the_template_is_documented_in_the_api_page() -> None:
    from local_stack.resources import load_template

    """As ``METHOD /path`` in code (path parameters by any name)."""
    api = re.sub(r"\{[^}]*\}", "{}", (DOCS / "api.md").read_text(encoding="utf-8"))
    routes = set()
    for resource in load_template()["Resources"].values():
        for event in (resource.get("Properties") or {}).get("Events", {}).values():
            props = event.get("Properties", {})
            if event.get("Type") == "HttpApi" and "Path" in props:
                routes.add((props["Method"].upper(), re.sub(r"\{[^}]*\}", "{}", props["Path"])))
    undocumented = sorted(
        f"{method} {path}"
        for method, path in routes
        if not re.search(rf"`{method} {re.escape(path)}(?:\?[^`]*)?`", api)
    )
    assert undocumented == []
