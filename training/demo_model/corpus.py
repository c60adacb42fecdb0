"""The demo model's corpus: prose from Debian packages plus generated dialogues that teach checkable skills.

Every source is a file that a Debian package installs (SOURCES names the package, path and licence), and every
random choice comes from a seeded generator, so the same packages give the same corpus. Each skill keeps a
held-out set (number pairs, words, day offsets, a question wording) that training never sees; `heldout_tests`
writes the test dialogues that `colibri eval` runs through the engine.
"""
from __future__ import annotations

import json
import random
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

FORTUNE_DIR = Path("/usr/share/games/fortunes")
# Collections of the `fortunes` and `fortunes-min` packages (BSD fortune-mod data, BSD licence). The ones left
# out are mostly jokes at someone's expense, ASCII art or long transcripts, which a demo should not recite.
FORTUNE_FILES = ["fortunes", "wisdom", "literature", "science", "computers", "people", "platitudes", "tao",
                 "kids", "pets", "food", "education", "work", "riddles", "goedel", "magic", "miscellaneous",
                 "paradoxum", "songs-poems", "sports", "linux", "humorists", "love", "definitions"]
WORDS_FILE = Path("/usr/share/dict/american-english")  # wamerican (SCOWL; permissive licence)
ISO_3166_FILE = Path("/usr/share/iso-codes/json/iso_3166-1.json")  # iso-codes (LGPL-2.1+)

SOURCES = [
    {"package": "fortunes, fortunes-min", "path": str(FORTUNE_DIR), "licence": "BSD (fortune-mod)",
     "use": "prose documents and 'tell me a fortune' replies"},
    {"package": "wamerican", "path": str(WORDS_FILE), "licence": "SCOWL (permission to use, copy, modify, distribute)",
     "use": "words to spell backwards"},
    {"package": "iso-codes", "path": str(ISO_3166_FILE), "licence": "LGPL-2.1+", "use": "country names of ISO 3166 codes"},
]

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}

# --------------------------------------------------------------------------------------------- sources


def load_fortunes() -> list[str]:
    out = []
    for name in FORTUNE_FILES:
        path = FORTUNE_DIR / name
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for entry in text.split("\n%\n"):
            entry = unicodedata.normalize("NFC", entry.strip("\n"))
            # Short, printable, no tabs or art: prose a small model can learn to reproduce.
            if not 20 <= len(entry) <= 320 or "\t" in entry or "  " * 4 in entry:
                continue
            if any(not (c.isprintable() or c == "\n") for c in entry) or "\ufffd" in entry:
                continue
            if not all(ord(c) < 0x250 or c in "\u2014\u2019\u201c\u201d" for c in entry):
                continue
            out.append(entry)
    return sorted(set(out))


def load_words() -> list[str]:
    words = set()
    for line in WORDS_FILE.read_text(encoding="utf-8").splitlines():
        if re.fullmatch(r"[a-z]{3,7}", line):
            words.add(line)
    return sorted(words)


def load_countries() -> list[tuple[str, str]]:
    data = json.loads(ISO_3166_FILE.read_text(encoding="utf-8"))["3166-1"]
    out = []
    for c in data:
        name = c.get("common_name", c["name"])
        if "," in name or "(" in name:  # "Bolivia, Plurinational State of": keep names a reply can say plainly
            continue
        out.append((c["alpha_2"], name))
    return sorted(out)


# --------------------------------------------------------------------------------------------- skills


@dataclass
class Splits:
    """What training may use and what only the held-out tests may."""
    arith_train: list[tuple[int, int, str]]
    arith_test: list[tuple[int, int, str]]
    compare_train: list[tuple[int, int]]
    compare_test: list[tuple[int, int]]
    words_train: list[str]
    words_test: list[str]
    days_train: list[tuple[int, int]]
    days_test: list[tuple[int, int]]
    countries: list[tuple[str, str]]
    fortunes: list[str]


def make_splits(seed: int = 18) -> Splits:
    rng = random.Random(seed)
    arith = [(a, b, op) for op in ("plus", "minus") for a in range(100) for b in range(100)]
    rng.shuffle(arith)
    n_test = len(arith) // 10
    compare = [(a, b) for a in range(100) for b in range(100) if a != b]
    rng.shuffle(compare)
    words = load_words()
    rng.shuffle(words)
    # Offsets of two to nine days; a day's successor ("after") is always trained.
    days = [(d, n) for d in range(7) for n in range(2, 10)]
    rng.shuffle(days)
    return Splits(arith_train=sorted(arith[n_test:]), arith_test=sorted(arith[:n_test]),
                  compare_train=sorted(compare[len(compare) // 10:]), compare_test=sorted(compare[:len(compare) // 10]),
                  words_train=sorted(words[len(words) // 10:]), words_test=sorted(words[:len(words) // 10]),
                  days_train=sorted(days[len(days) // 5:]), days_test=sorted(days[:len(days) // 5]),
                  countries=load_countries(), fortunes=load_fortunes())


def arith_question(rng: random.Random, a: int, b: int, op: str) -> str:
    if op == "plus":
        forms = ["What is {a} plus {b}?", "What is {a} + {b}?", "How much is {a} plus {b}?", "Add {a} and {b}.",
                 "{a} + {b} = ?", "Calculate {a} plus {b}.", "what is {a} plus {b}", "What's {a} plus {b}?"]
    else:
        forms = ["What is {a} minus {b}?", "What is {a} - {b}?", "How much is {a} minus {b}?",
                 "Subtract {b} from {a}.", "{a} - {b} = ?", "Calculate {a} minus {b}.", "what is {a} minus {b}",
                 "What's {a} minus {b}?"]
    return rng.choice(forms).format(a=a, b=b)


def arith_answer(a: int, b: int, op: str) -> str:
    return f"{a} {op} {b} is {a + b if op == 'plus' else a - b}."


def arith_worked_answer(a: int, b: int, op: str) -> str:
    """The answer worked digit by digit, units first, the way it is taught at school: each step is a one-digit
    fact and the result's digits are copied from the steps. A 4-layer model that has to produce the tens digit
    before the units (and so see the carry ahead) got 20 % of held-out sums right after 750 steps."""
    if op == "plus":
        u = a % 10 + b % 10
        first = f"{a % 10} plus {b % 10} is {u}" + (f", write {u - 10} carry 1." if u >= 10 else ".")
        carry = " plus 1" if u >= 10 else ""
        t = a // 10 + b // 10 + (u >= 10)
        return f"{first} {a // 10} plus {b // 10}{carry} is {t}. So {a} plus {b} is {a + b}."
    hi, lo = max(a, b), min(a, b)
    lead = "" if a >= b else f"{b} is larger than {a}, so take {b} minus {a}: "
    if hi % 10 >= lo % 10:
        first, borrow = f"{hi % 10} minus {lo % 10} is {hi % 10 - lo % 10}.", ""
    else:
        first, borrow = f"{hi % 10} is less than {lo % 10}, so borrow: {hi % 10 + 10} minus {lo % 10} is {hi % 10 + 10 - lo % 10}.", " minus 1"
    t = hi // 10 - lo // 10 - (1 if borrow else 0)
    return f"{lead}{first} {hi // 10} minus {lo // 10}{borrow} is {t}. So {a} minus {b} is {a - b}."


def compare_question(rng: random.Random, a: int, b: int) -> tuple[str, str]:
    if rng.random() < 0.5:
        q = rng.choice(["Which is larger, {a} or {b}?", "Which number is bigger: {a} or {b}?", "Is {a} or {b} larger?"])
        hi, lo = max(a, b), min(a, b)
        return q.format(a=a, b=b), f"{hi} is larger than {lo}."
    q = rng.choice(["Which is smaller, {a} or {b}?", "Which number is smaller: {a} or {b}?", "Is {a} or {b} smaller?"])
    hi, lo = max(a, b), min(a, b)
    return q.format(a=a, b=b), f"{lo} is smaller than {hi}."


def spaced(word: str) -> str:
    return " ".join(word)


def backwards_question(rng: random.Random, w: str) -> str:
    # The word always follows a space, so it is the same token(s) here as in the reply ("The word garden ...").
    return rng.choice(["Spell {w} backwards.", "How do you spell {w} backwards?", "Write {w} backwards.",
                       "spell {w} backwards", "Reverse the word {w}.", "Can you spell {w} backwards?"]).format(w=w)


def backwards_answer(w: str) -> str:
    # Spelling the word forwards first makes the reversal a pattern over single letters, which attention can do.
    return f"The word {w} is spelled {spaced(w)}, so backwards it is {spaced(w[::-1])}."


def day_question(rng: random.Random, d: int, n: int) -> tuple[str, str]:
    day, target = WEEKDAYS[d], WEEKDAYS[(d + n) % 7]
    if n == 1:
        q = rng.choice(["What day comes after {day}?", "What is the day after {day}?", "Which day follows {day}?",
                        "what day comes after {day}"]).format(day=day)
        return q, f"The day after {day} is {target}."
    count = str(n) if rng.random() < 0.5 else NUMBER_WORDS[n]
    q = rng.choice(["What day is {n} days after {day}?", "Which day is it {n} days after {day}?",
                    "If today is {day}, what day is it in {n} days?"]).format(n=count, day=day)
    return q, f"{n} days after {day} is {target}."


COUNTRY_TRAIN_FORMS = ["Which country has the code {c}?", "Which country has the ISO code {c}?",
                       "What country is {c}?", "Name the country with the code {c}.", "which country is {c}"]
COUNTRY_TEST_FORM = "What country does the code {c} stand for?"  # never trained: the held-out wording


def country_answer(code: str, name: str) -> str:
    return f"{code} is the code of {name}."


FORTUNE_QUESTIONS = ["Tell me a fortune.", "Give me a fortune.", "Tell me something wise.", "Say something clever.",
                     "tell me a fortune", "Can you tell me a fortune?", "Quote something.", "Tell me a saying."]

# The self-description names only what the model does on held-out questions (docs/DEMO_MODEL.md): it is trained
# on spelling backwards, weekdays and country codes too, but answers too few of them to claim them.
ABOUT = ("I am the Colibri demo model, a small mixture of experts trained on this machine. I can add and subtract "
         "numbers below 100, tell which of two numbers is larger, and tell you a fortune.")
# The self-description of the first shipped run, which claimed every trained skill.
ABOUT_FIRST_RUN = ("I am the Colibri demo model, a small mixture of experts trained on this machine. I can add and "
                   "subtract numbers below 100, compare two numbers, spell words backwards, name the country of a "
                   "two-letter code, tell which day comes after another, and tell you a fortune.")
ABOUT_QUESTIONS = ["Hello", "Hi", "Hello!", "Hi there", "Who are you?", "What can you do?", "help", "Help",
                   "What are you?", "hello"]


class DialogueSource:
    """An endless, seeded stream of training documents: chats of one to three turns, and prose."""

    def __init__(self, splits: Splits, seed: int):
        self.s = splits
        self.rng = random.Random(seed)
        self.worked_arithmetic = False  # train.py switches to worked answers at --worked-from
        self.minus_share = None  # a share of subtractions among the sums (--minus-share); None: as drawn
        self.about = ABOUT

    def turn(self) -> tuple[str, str]:
        rng, s = self.rng, self.s
        r = rng.random()
        if r < 0.45:
            a, b, op = rng.choice(s.arith_train)
            if self.minus_share is not None:
                want = "minus" if rng.random() < self.minus_share else "plus"
                while op != want:
                    a, b, op = rng.choice(s.arith_train)
            answer = arith_worked_answer if self.worked_arithmetic else arith_answer
            return arith_question(rng, a, b, op), answer(a, b, op)
        if r < 0.53:
            a, b = rng.choice(s.compare_train)
            return compare_question(rng, a, b)
        if r < 0.70:
            w = rng.choice(s.words_train)
            return backwards_question(rng, w), backwards_answer(w)
        if r < 0.77:
            if rng.random() < 0.3:
                return day_question(rng, rng.randrange(7), 1)
            d, n = rng.choice(s.days_train)
            return day_question(rng, d, n)
        if r < 0.87:
            code, name = rng.choice(s.countries)
            return rng.choice(COUNTRY_TRAIN_FORMS).format(c=code), country_answer(code, name)
        if r < 0.97:
            return rng.choice(FORTUNE_QUESTIONS), rng.choice(s.fortunes)
        return rng.choice(ABOUT_QUESTIONS), self.about

    def document(self) -> dict:
        """{"chat": [(user, assistant), ...]} or {"text": prose}."""
        if self.rng.random() < 0.10:
            return {"text": self.rng.choice(self.s.fortunes)}
        turns = self.rng.choice([1, 1, 2, 2, 3])
        return {"chat": [self.turn() for _ in range(turns)]}


def _re_escape(text: str) -> str:
    """Escapes text for an ECMAScript regular expression (what `colibri eval` uses)."""
    return "".join("\\" + c if c in r"\^$.|?*+()[]{}/" else c for c in text)


def heldout_tests(s: Splits, seed: int = 1818) -> list[dict]:
    """The held-out test dialogues: one user message each, the expected answer, and `expect_regex`, which a
    correct reply matches (ECMAScript, as `colibri eval --dialogues` reads it)."""
    rng = random.Random(seed)
    tests = []
    end = r"\.?\s*$"
    for a, b, op in sorted(rng.sample(s.arith_test, 400)):
        c = str(a + b if op == "plus" else a - b)
        tests.append({"skill": "arithmetic", "prompt": f"What is {a} {op} {b}?", "expect": c,
                      "expect_regex": f"(^|[^0-9-]){c}{end}"})
    for a, b in sorted(rng.sample(s.compare_test, 100)):
        tests.append({"skill": "compare", "prompt": f"Which is larger, {a} or {b}?", "expect": str(max(a, b)),
                      "expect_regex": f"^\\s*{max(a, b)}([^0-9]|$)"})
    for w in sorted(rng.sample(s.words_test, 200)):
        tests.append({"skill": "backwards", "prompt": f"Spell {w} backwards.", "expect": spaced(w[::-1]),
                      "expect_regex": f"backwards it is {spaced(w[::-1])}{end}"})
    for d, n in s.days_test:
        target = WEEKDAYS[(d + n) % 7]
        tests.append({"skill": "weekday", "prompt": f"What day is {n} days after {WEEKDAYS[d]}?", "expect": target,
                      "expect_regex": f"{target}{end}"})
    for code, name in sorted(rng.sample(s.countries, 100)):
        tests.append({"skill": "country", "prompt": COUNTRY_TEST_FORM.format(c=code), "expect": name,
                      "expect_regex": f"is the code of {_re_escape(name)}{end}"})
    for q in ["Tell me a fortune.", "Please tell me a fortune.", "Do you know a good saying?", "Tell me a quote."] * 10:
        tests.append({"skill": "fortune", "prompt": q, "expect": "", "expect_regex": r"\S"})
    return tests


def check_reply(test: dict, reply: str, fortunes: set[str] | None = None) -> bool:
    """Whether a reply answers a held-out test correctly (fortune: the reply is some fortune of the corpus)."""
    skill, expect = test["skill"], test["expect"]
    if skill in ("arithmetic", "compare"):
        nums = re.findall(r"-?\d+", reply)
        if skill == "compare":
            return bool(nums) and nums[0] == expect
        return bool(nums) and nums[-1] == expect
    if skill == "backwards":
        m = re.search(r"backwards it is (.*?)\.?$", reply.strip())
        return m is not None and m.group(1) == expect
    if skill == "weekday":
        days = re.findall("|".join(WEEKDAYS), reply)
        return bool(days) and days[-1] == expect
    if skill == "country":
        return reply.strip().endswith(f"is the code of {expect}.")
    if skill == "fortune":
        return fortunes is not None and reply.strip() in fortunes
    raise ValueError(skill)
