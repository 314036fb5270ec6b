"""What is true, for the readers of the loaded ledgers: the fact lifecycle
(memory.facts.lifecycle) over the files a search or recall loaded anyway, so knowing a
hit's state costs no request.

    a ledger line   -> its fact (by day and words) and where it stands: current (perhaps
                       to re-check), superseded, retracted, expired; or a record (a
                       retraction or confirmation, which states no fact)
    a MEMORY.md line -> the retired fact it restates, if any (the same words, or the
                       same distinctive words): curated memory lags the ledgers until
                       the next consolidation, and no reader shows a retired fact; the
                       injection drops such lines (``current_memory``), a person's own
                       kept unless the user or an operator retired the fact

Built once per set of loaded files and day (the files are the per-container cache's, one
object per ETag), so a warm container pays for it once per ledger change.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_harness.memory.facts.authority import (
    OPERATOR,
    USER,
    distinctive,
    parse_fact,
    strip_tags,
)
from agent_harness.memory.facts.lifecycle import (
    LedgerFact,
    Lifecycle,
    Marks,
    Status,
    ledger_fact_id,
    lifecycle_of,
    split_marks,
)
from agent_harness.paths import ledger_date

if TYPE_CHECKING:
    from agent_harness.memory.engine.file_index import FileIndex

__all__ = ["Truth", "day_of_path", "truth_of"]

#: truths kept per container (one per user and day, roughly)
KEPT = 16
_TRUTHS: OrderedDict[tuple[object, ...], tuple[list[object], Truth]] = OrderedDict()


def day_of_path(path: str) -> str | None:
    date = ledger_date(path)
    return f"{date[0]:04d}-{date[1]:02d}-{date[2]:02d}" if date else None


def _words(text: str) -> str:
    body = split_marks(strip_tags(text))[0]
    return " ".join(strip_tags(body).casefold().split()).rstrip(".!")


@dataclass
class Truth:
    life: Lifecycle
    #: the ledgers it was read from (day -> text): a retired fact said again on a day the
    #: lifecycle did not read is found there
    texts: dict[str, str] = field(default_factory=dict)
    #: the retired facts by their words, and by their distinctive words
    _retired_words: dict[str, LedgerFact] = field(default_factory=dict)
    _retired_terms: dict[frozenset[str], LedgerFact] = field(default_factory=dict)
    _current_words: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for fact in self.life.facts.values():
            if fact.is_record:
                continue
            if self.life.status[fact.id].state == "current":
                self._current_words.add(_words(fact.text))
                continue
            self._retired_words[_words(fact.text)] = fact
            key = frozenset(distinctive(fact.text))
            if key:
                self._retired_terms[key] = fact

    def fact(self, path: str, text: str) -> LedgerFact | None:
        """The ledger fact a line of ``path`` is (None: not a ledger, or not a fact). A
        line of a day the lifecycle did not need to read is a current fact, no marks."""
        day = day_of_path(path)
        parsed = parse_fact(text)
        if day is None or parsed is None:
            return None
        fact_id = ledger_fact_id(day, parsed.text)
        known = self.life.facts.get(fact_id)
        if known is not None or day in self.life.parsed:
            return known
        body = strip_tags(parsed.text).strip()
        return LedgerFact(fact_id, day, 0, body, parsed.authority, day, Marks())

    def status(self, fact: LedgerFact) -> Status:
        return self.life.status_of(fact.id)

    def restated(self, text: str) -> LedgerFact | None:
        """The retired fact a MEMORY.md line restates, if any."""
        parsed = parse_fact(text)
        body = parsed.text if parsed is not None else text
        found = self._retired_words.get(_words(body))
        if found is None:
            found = self._retired_terms.get(frozenset(distinctive(split_marks(body)[0])))
        # a current fact with the same words (said again after it was retired) keeps it
        if found is None or _words(found.text) in self._current_words:
            return None
        return None if self._said_again(found) else found

    def _said_again(self, gone: LedgerFact) -> bool:
        """Is ``gone``'s text a fact of a later day the lifecycle did not read (all
        current there)? A substring test first, then the line's own words."""
        needle = gone.text.casefold()
        for day, text in self.texts.items():
            if day <= gone.day or day in self.life.parsed or needle not in text.casefold():
                continue
            for line in text.splitlines():
                parsed = parse_fact(line)
                if parsed is not None and _words(parsed.text) == _words(gone.text):
                    return True
        return False

    def stale(self, text: str) -> list[int]:
        """The lines of a MEMORY.md ``text`` (0-based) that restate a retired fact. A
        person's own line (``[operator]``) stays unless the user or an operator retired
        the fact: an edit outranks what a model or a tool later claimed."""
        out = []
        for number, line in enumerate(text.splitlines()):
            gone = self.restated(line)
            if gone is None:
                continue
            parsed = parse_fact(line)
            if parsed is not None and parsed.authority == OPERATOR:
                by = self.life.status[gone.id].by
                retirer = self.life.facts[by].authority if by in self.life.facts else None
                if retirer not in (OPERATOR, USER):
                    continue
            out.append(number)
        return out

    def current_memory(self, text: str) -> str:
        """MEMORY.md's ``text`` without its stale lines (``stale``)."""
        drop = set(self.stale(text))
        if not drop:
            return text
        kept = [line for n, line in enumerate(text.splitlines()) if n not in drop]
        return "\n".join(kept) + ("\n" if text.endswith("\n") else "")


def truth_of(files: list[tuple[str, FileIndex]], on: str | None) -> Truth:
    """The truth of the ledgers among ``files`` at the end of day ``on`` (None: as
    written). An active ledger wins over the archived copy of its day (archiving copies,
    then deletes)."""
    ledgers = [(p, f) for p, f in files if day_of_path(p) is not None]
    key = (tuple((p, id(f)) for p, f in ledgers), on)
    kept = _TRUTHS.get(key)
    if kept is not None:
        _TRUTHS.move_to_end(key)
        return kept[1]
    texts: dict[str, str] = {}
    for path, index in sorted(ledgers, key=lambda pf: "/archive/" not in pf[0]):
        day = day_of_path(path)
        assert day is not None
        texts[day] = "\n".join(index.lines)  # the active ledger last: it wins
    truth = Truth(lifecycle_of(texts, on, whole=False), texts)
    _TRUTHS[key] = ([f for _, f in ledgers], truth)  # the files held: their ids stay theirs
    while len(_TRUTHS) > KEPT:
        _TRUTHS.popitem(last=False)
    return truth
