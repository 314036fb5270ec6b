# ruff: noqa: E501  (the phrasing tables and report rows read best one per line)
"""The "stays true" dataset: generated users whose facts change over sessions.

Deterministic (a seeded ``random.Random``). Each user has stable facts, changing facts
(home, employer, tools, a preference), a trip with an end date, a plan (often cancelled
later), the cascades of the home (a commute stated with it: the lifecycle's implicit
dependents rule; a gym stated in a later session with an explicit ``(depends <id>)``),
and, for some users, many unrelated facts, so the flush's related-facts ranking has
competition. Every fact's text uses the words of the user's message that states it (so
the flush attributes it to the import, as it would a real user's words).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta

__all__ = ["Fact", "Session", "User", "generate"]

SEED = 20260105
USERS, QUICK_USERS = 40, 4
START = date(2026, 1, 5)

CITIES = [
    "Porto", "Valencia", "Gdansk", "Ljubljana", "Tartu", "Bilbao", "Graz", "Aarhus",
    "Lyon", "Bologna", "Leuven", "Brno", "Cork", "Tampere", "Malmo", "Utrecht", "Seville",
    "Krakow", "Turku", "Nantes", "Freiburg", "Trieste", "Galway", "Debrecen",
]  # fmt: skip
EMPLOYERS = [
    "Lumenwerk", "Quarrystone", "Bluefinch Labs", "Okapi Freight", "Tessellate",
    "Harbor Mills", "Kestrel Health", "Vantablue", "Orchard Logic", "Pinecone Audio",
    "Marlow Insurance", "Copperleaf", "Driftwood Games", "Sable Robotics",
]  # fmt: skip
ROLES = ["data analyst", "product designer", "site reliability engineer", "sales lead",
         "research chemist", "copywriter", "quality auditor", "backend developer"]  # fmt: skip
EDITORS = ["Neovim", "Emacs", "Sublime Text", "Helix", "Zed", "IntelliJ", "Kate", "Nova"]
PHONES = ["Pixel 8", "iPhone 15", "Fairphone 5", "Galaxy S23", "Nothing Phone", "Xperia 10"]
BANKS = ["Monzo", "Revolut", "ING", "N26", "Bunq", "Triodos", "Starling"]
DRINKS = ["espresso", "matcha", "rooibos", "chai", "yerba mate", "oolong", "cold brew"]
SIBLINGS = ["Ingrid", "Tomasz", "Aiyana", "Rafferty", "Solveig", "Benedek", "Maelle", "Oskar"]
ALLERGIES = ["peanuts", "shellfish", "penicillin", "kiwi", "sesame", "latex", "bee stings"]
FOODS = ["dosa", "pierogi", "ramen", "paella", "pho", "khachapuri", "bibimbap", "tagine"]
TRIPS = [
    ("Lisbon", "web summit"), ("Nairobi", "field study"), ("Osaka", "robotics fair"),
    ("Reykjavik", "photo workshop"), ("Montreal", "jazz festival"), ("Tbilisi", "wine tour"),
    ("Hanoi", "supplier visit"), ("Santiago", "mining conference"),
]  # fmt: skip
PLANS = [
    ("a pottery course", "Kyoto"), ("a sailing licence", "Split"), ("a marathon", "Vienna"),
    ("a language school", "Salamanca"), ("a glassblowing class", "Murano"),
    ("a cooking retreat", "Oaxaca"), ("a climbing trip", "Chamonix"),
]  # fmt: skip
GYMS = ["Ironworks", "Boulderhaus", "Cliffside", "Granite Loft", "Basecamp", "Overhang"]
BAKERIES = ["Forno Nuvola", "Crumb and Co", "Padaria Sol", "Brotzeit", "Levain Rouge"]
TRAMS = ["tram 18", "bus 42", "tram 7", "metro line 3", "bus 205", "ferry 11"]
FILLER_THINGS = [
    "kayak", "ukulele", "telescope", "bonsai", "typewriter", "sourdough starter",
    "vinyl collection", "aquarium", "drone", "chess set", "sewing machine", "hammock",
    "espalier pear tree", "film camera", "harmonica", "canoe", "loom", "metal detector",
]  # fmt: skip
FILLER_ADJ = ["teal", "antique", "secondhand", "tiny", "restored", "borrowed", "handmade",
              "vintage", "folding", "electric", "wooden", "striped"]  # fmt: skip
FILLER_TOPICS = [
    "medieval maps", "tide tables", "Byzantine coins", "jazz harmony", "beekeeping",
    "orbital mechanics", "bookbinding", "mycology", "Baroque opera", "tram history",
    "Arctic explorers", "origami", "fermentation", "lighthouses", "cartography",
    "volcanoes", "typography", "falconry", "glaciers", "shipwrecks",
]  # fmt: skip
ACK = "Got it, thanks for telling me."


@dataclass(frozen=True)
class Fact:
    """One statement of the dataset: what the user says, and the fact the memory model
    writes for it (or, for a cancellation, the retraction's why)."""

    key: str  # unique: "<user>.<attribute>.<n>"
    kind: str  # stable, home, job, tool, pref, trip, plan, cancel, commute, gym, filler
    attribute: str  # what question it answers ("home", "editor", ...)
    message: str
    text: str
    supersedes: str | None = None  # the key of the fact it replaces
    retracts: str | None = None  # a cancellation: the key of the plan
    until: str | None = None
    depends: str | None = None  # explicit: the key of the home it holds with
    ground: str | None = None  # the home it depends on (implicit or explicit)
    survives: bool = False  # a dependent still true when its ground is retired
    wording: str = ""  # how the change is phrased: "old value", "attribute", "neither"


@dataclass
class Session:
    id: str
    day: str
    facts: list[Fact] = field(default_factory=list)


@dataclass
class User:
    id: str
    sessions: list[Session]
    question_day: str
    facts: dict[str, Fact] = field(default_factory=dict)
    #: questions: attribute -> the question's text
    questions: dict[str, str] = field(default_factory=dict)


def _pick(rng: random.Random, pool: list[str], taken: set[str]) -> str:
    choice = rng.choice([p for p in pool if p not in taken] or pool)
    taken.add(choice)
    return choice


class _Builder:
    def __init__(self, rng: random.Random, uid: str) -> None:
        self.rng, self.uid = rng, uid
        self.counts: dict[str, int] = {}
        self.facts: dict[str, Fact] = {}
        self.current: dict[str, str] = {}  # attribute -> key of its current version

    def add(self, session: Session, kind: str, attribute: str, message: str, text: str,
            **extra: object) -> Fact:  # fmt: skip
        n = self.counts[attribute] = self.counts.get(attribute, 0) + 1
        fact = Fact(f"{self.uid}.{attribute}.{n}", kind, attribute, message, text, **extra)  # type: ignore[arg-type]
        self.facts[fact.key] = fact
        session.facts.append(fact)
        if kind != "cancel":
            self.current[attribute] = fact.key
        return fact


def _wording(rng: random.Random) -> str:
    """How a change is phrased: naming the old value, the attribute, neither, or
    ``unlike``: sharing no word with the old fact at all (its fact too), as people and a
    real memory model paraphrase; only meaning finds the old fact then."""
    return rng.choice(["old value", "attribute", "neither", "unlike"])


def _move(b: _Builder, s: Session, old: str, new: str) -> Fact:
    w = _wording(b.rng)
    if w == "old value":
        msg, text = f"I moved out of {old}, I live in {new} now.", f"The user lives in {new}."
    elif w == "attribute":
        msg, text = f"These days I live in {new}; we found a flat.", f"The user lives in {new}."
    elif w == "neither":
        msg, text = f"Big news: we relocated to {new} last month!", f"The user relocated to {new}."
    else:
        msg = f"We finally unpacked the last boxes at our new flat in {new}."
        text = f"The user's new flat is in {new}."
    return b.add(s, "home", "home", msg, text, supersedes=b.current["home"], wording=w)


def _commute(b: _Builder, s: Session, city: str, taken: set[str]) -> Fact:
    line = _pick(b.rng, TRAMS, taken)
    msg = f"From my place in {city} I take the {line} to the office."
    text = f"The user takes the {line} from their place in {city} to the office."
    old = b.current.get("commute")
    return b.add(s, "commute", "commute", msg, text, ground=b.current["home"], supersedes=old)


def _user(rng: random.Random, number: int) -> User:
    uid = f"stays-{number:02d}"
    b = _Builder(rng, uid)
    taken: set[str] = set()
    count = rng.randint(4, 8)
    days, day = [], START + timedelta(days=rng.randint(0, 6))
    for _ in range(count):
        days.append(day)
        day += timedelta(days=rng.randint(5, 11))
    sessions = [Session(f"{uid}-s{k}", d.isoformat()) for k, d in enumerate(days)]
    question_day = (days[-1] + timedelta(days=2)).isoformat()
    s0, s1 = sessions[0], sessions[1]

    sib, allergy, food = rng.choice(SIBLINGS), rng.choice(ALLERGIES), rng.choice(FOODS)
    b.add(
        s0,
        "stable",
        "sibling",
        f"My sister is called {sib}.",
        f"The user's sister is called {sib}.",
    )
    b.add(
        s0,
        "stable",
        "allergy",
        f"I'm allergic to {allergy}.",
        f"The user is allergic to {allergy}.",
    )
    b.add(
        s0,
        "stable",
        "food",
        f"My favourite dish is {food}.",
        f"The user's favourite dish is {food}.",
    )
    city = _pick(rng, CITIES, taken)
    b.add(s0, "home", "home", f"I live in {city}.", f"The user lives in {city}.")
    _commute(b, s0, city, taken)
    employer, role = _pick(rng, EMPLOYERS, taken), rng.choice(ROLES)
    b.add(s0, "job", "employer", f"I work at {employer} as a {role}.",
          f"The user works at {employer} as a {role}.")  # fmt: skip
    tools = rng.sample(["editor", "phone", "bank"], 2)
    pools = {"editor": EDITORS, "phone": PHONES, "bank": BANKS}
    for tool in tools:
        value = _pick(rng, pools[tool], taken)
        msg, text = {
            "editor": (f"I write my code in {value}.", f"The user writes code in {value}."),
            "phone": (f"My phone is a {value}.", f"The user's phone is a {value}."),
            "bank": (f"I bank with {value}.", f"The user banks with {value}."),
        }[tool]
        b.add(s0, "tool", tool, msg, text)
    drink = _pick(rng, DRINKS, taken)
    b.add(
        s0,
        "pref",
        "drink",
        f"Every morning I drink {drink}.",
        f"The user drinks {drink} every morning.",
    )

    # s1: a gym near home (explicit depends), a plan, maybe a bakery (explicit too)
    gym = rng.choice(GYMS)
    if rng.random() < 0.5:
        msg, text = (f"I joined the {gym} climbing gym here in {city}.",
                     f"The user joined the {gym} climbing gym in {city}.")  # fmt: skip
    else:
        msg, text = (f"I joined the {gym} climbing gym, a short walk from my flat.",
                     f"The user joined the {gym} climbing gym, a short walk from their flat.")  # fmt: skip
    survives = rng.random() < 0.3
    b.add(s1, "gym", "gym", msg, text, depends=b.current["home"], ground=b.current["home"],
          survives=survives)  # fmt: skip
    activity, place = rng.choice(PLANS)
    month = rng.choice(["May", "June", "September", "October"])
    b.add(s1, "plan", "plan", f"I signed up for {activity} in {place} in {month}.",
          f"The user signed up for {activity} in {place} in {month}.")  # fmt: skip

    # the changes, spread over the later sessions
    later = sessions[2:] if len(sessions) > 2 else sessions[1:]
    changes = ["move", "job", "tool", "pref", "trip"]
    if rng.random() < 0.75:
        changes.append("cancel")
    if rng.random() < 0.35 and len(later) >= 3:
        changes.append("move")
    rng.shuffle(changes)
    slots = sorted(rng.randrange(len(later)) for _ in changes)
    moved_in: set[int] = set()
    for slot, change in zip(slots, changes, strict=True):
        s = later[slot]
        if change == "move":
            if slot in moved_in:  # one move a session
                if slot + 1 >= len(later):
                    continue
                slot += 1
                s = later[slot]
            moved_in.add(slot)
            old = b.facts[b.current["home"]].text.rsplit(" ", 1)[-1].rstrip(".")
            new = _pick(rng, CITIES, taken)
            _move(b, s, old, new)
            if rng.random() < 0.7:
                _commute(b, s, new, taken)
        elif change == "job":
            new, role = _pick(rng, EMPLOYERS, taken), rng.choice(ROLES)
            old_text = b.facts[b.current["employer"]].text
            old = old_text.split(" at ", 1)[1].split(" as ")[0]
            w = _wording(rng)
            if w == "unlike":  # another role: no word of the old fact
                role = rng.choice([r for r in ROLES if r not in old_text])
            msg, text = {
                "old value": (f"I left {old} and I work at {new} now, as a {role}.",
                              f"The user works at {new} as a {role}."),
                "attribute": (f"I work at {new} now, as a {role}.",
                              f"The user works at {new} as a {role}."),
                "neither": (f"Started a new position at {new} on Monday, {role} again.",
                            f"The user started a new position at {new} as a {role}."),
                "unlike": (f"Today was my first day on the {new} payroll, doing {role} duties.",
                           f"The user is on the {new} payroll, doing {role} duties."),
            }[w]  # fmt: skip
            b.add(s, "job", "employer", msg, text, supersedes=b.current["employer"], wording=w)
        elif change == "tool":
            tool = rng.choice(tools)
            new = _pick(rng, pools[tool], taken)
            w = _wording(rng)
            old_text = b.facts[b.current[tool]].text
            old = old_text.split(
                " in " if tool == "editor" else " is a " if tool == "phone" else " with ", 1
            )[1].rstrip(".")
            msg, text = {
                ("editor", "old value"): (f"I dropped {old}; I write my code in {new} now.", f"The user writes code in {new}."),
                ("editor", "attribute"): (f"I write my code in {new} these days.", f"The user writes code in {new}."),
                ("editor", "neither"): (f"Gave {new} a try and never looked back.", f"The user gave {new} a try and never looked back."),
                ("phone", "old value"): (f"I sold the {old}, my phone is a {new} now.", f"The user's phone is a {new}."),
                ("phone", "attribute"): (f"My phone is a {new} since last week.", f"The user's phone is a {new}."),
                ("phone", "neither"): (f"Treated myself to a {new} at last.", f"The user treated themselves to a {new}."),
                ("bank", "old value"): (f"I closed my {old} account; I bank with {new} now.", f"The user banks with {new}."),
                ("bank", "attribute"): (f"I bank with {new} these days.", f"The user banks with {new}."),
                ("bank", "neither"): (f"Opened an account at {new} and moved my salary there.", f"The user moved their salary to an account at {new}."),
                ("editor", "unlike"): (f"All my programming happens in {new} since the spring.", f"The user does their programming in {new}."),
                ("phone", "unlike"): (f"Carrying a {new} in my pocket these days.", f"The user carries a {new} in their pocket."),
                ("bank", "unlike"): (f"My salary lands at {new} from this month.", f"The user's salary lands at {new}."),
            }[(tool, w)]  # fmt: skip
            b.add(s, "tool", tool, msg, text, supersedes=b.current[tool], wording=w)
        elif change == "pref":
            new = _pick(rng, DRINKS, taken)
            old = (
                b.facts[b.current["drink"]]
                .text.split(" drinks ", 1)[1]
                .replace(" every morning.", "")
            )
            w = _wording(rng)
            msg, text = {
                "old value": (f"I gave up {old}; every morning I drink {new} now.", f"The user drinks {new} every morning."),
                "attribute": (f"Every morning I drink {new} these days.", f"The user drinks {new} every morning."),
                "neither": (f"Switched my breakfast cup to {new}.", f"The user switched their breakfast cup to {new}."),
                "unlike": (f"Lately my breakfast mug holds {new}.", f"The user's breakfast mug holds {new}."),
            }[w]  # fmt: skip
            b.add(s, "pref", "drink", msg, text, supersedes=b.current["drink"], wording=w)
        elif change == "trip":
            place, why = rng.choice(TRIPS)
            ongoing = rng.random() < 0.25
            s = later[-1] if ongoing else s
            start = date.fromisoformat(s.day)
            end = date.fromisoformat(question_day) + timedelta(days=6) if ongoing else (
                start + timedelta(days=rng.randint(2, 4)))  # fmt: skip
            if not ongoing and end.isoformat() >= question_day:
                end = date.fromisoformat(question_day) - timedelta(days=1)
            msg = f"I'm in {place} for the {why} until {end.isoformat()}."
            text = f"The user is in {place} for the {why}."
            b.add(s, "trip", "trip", msg, text, until=end.isoformat())
        elif change == "cancel":
            plan = b.facts[b.current["plan"]]
            what = plan.text.removeprefix("The user signed up for ").rsplit(" in ", 1)[0]
            msg = f"I cancelled {what}, it clashed with everything."
            text = f"The user cancelled {what}."
            b.add(s, "cancel", "plan", msg, text, retracts=plan.key)

    # unrelated facts: a few for everyone, many for some
    fillers = rng.choice([6, 10, 40, 80, 120]) if number % 3 == 0 else rng.randint(4, 12)
    for n in range(fillers):
        s = sessions[n % len(sessions)]
        if n % 2:
            topic = FILLER_TOPICS[(n * 7 + number) % len(FILLER_TOPICS)]
            word = ["reads about", "collects notes on", "follows podcasts on", "studies"][n % 4]
            msg = f"Lately I {word.replace('reads', 'read').replace('collects', 'collect').replace('follows', 'follow').replace('studies', 'study')} {topic} (item {n})."
            text = f"The user {word} {topic} (item {n})."
        else:
            thing = f"{FILLER_ADJ[(n + number) % len(FILLER_ADJ)]} {FILLER_THINGS[(n * 5 + number) % len(FILLER_THINGS)]}"
            msg, text = (
                f"I own a {thing}, number {n} of my things.",
                f"The user owns a {thing}, number {n}.",
            )
        b.add(s, "filler", f"filler{n}", msg, text)

    user = User(uid, sessions, question_day, b.facts)
    user.questions = {
        "home": "Where do I live these days?",
        "commute": "How do I get to the office now?",
        "gym": "Do I still climb at my gym?",
        "employer": "Who do I work for now?",
        "drink": "What do I drink every morning?",
        "trip": "Am I still away on that trip?",
        "plan": "Am I still signed up for that course or trip I planned?",
        "sibling": "What is my sister called?",
        "allergy": "What am I allergic to?",
        **{
            t: {
                "editor": "Which editor do I write code in?",
                "phone": "Which phone do I have?",
                "bank": "Which bank am I with?",
            }[t]
            for t in tools
        },
    }
    return user


def generate(quick: bool = False, seed: int = SEED) -> list[User]:
    rng = random.Random(seed)
    users = [_user(rng, n) for n in range(USERS)]
    return users[:QUICK_USERS] if quick else users
