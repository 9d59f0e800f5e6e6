"""Long-term conversational memory data sets, recognized by their layout, as one shape:
conversations of dated sessions of turns, and questions whose evidence is known turns.

Any JSON file under `../shared/data` whose layout a loader recognizes is picked up, so a
dropped-in copy of a public set is measured beside LoCoMo without code changes:

- LoCoMo (`locomo10.json` and parts of it): a list of samples with `conversation`
  (`session_N` turn lists with `dia_id`, `session_N_date_time`) and `qa` (`question`,
  `category` 1-5, `evidence` dia_ids). Categories 1-4 are asked; 5 (adversarial) is not.
- LongMemEval (`longmemeval_s.json`, `_m`, `_oracle`): a list of items, each its own
  haystack — `haystack_sessions` (turns with `role`, `content`, `has_answer`),
  `haystack_session_ids`, `haystack_dates` — and one `question` of a `question_type`, asked
  on `question_date`. Evidence is the turns marked `has_answer`; abstention questions
  (`_abs`) and questions with no marked turn are skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_DIA = re.compile(r"D:?(\d+):(\d+)")
_HEAD_BYTES = 1 << 20  # enough of a file to tell its layout


@dataclass(frozen=True)
class Turn:
    id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    id: str
    at: dt.datetime  # naive UTC
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: str
    evidence: frozenset[str]  # turn ids
    asked_at: dt.datetime | None = None  # the set's own "now", if it has one


@dataclass(frozen=True)
class Conversation:
    id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> dict[str, Turn]:
        return {t.id: t for s in self.sessions for t in s.turns}


@dataclass(frozen=True)
class Dataset:
    name: str  # the layout: "locomo", "longmemeval"
    path: Path
    conversations: tuple[Conversation, ...]
    skipped: int = 0  # questions left out (unanswerable, no evidence turns)


# --- LoCoMo ------------------------------------------------------------------------------


def locomo_date(text: str) -> dt.datetime:
    """LoCoMo's '1:56 pm on 8 May, 2023'."""
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def locomo_text(turn: dict) -> str:
    """What was said, and the photo shared with it as the chat shows it (its caption)."""
    text = turn["text"].strip()
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption'].strip()}]"
    return text


def load_locomo(items: list[dict], path: Path) -> Dataset:
    conversations, skipped = [], 0
    for sample in items:
        conv = sample["conversation"]
        numbers = sorted(
            int(key.split("_")[1])
            for key, value in conv.items()
            if key.startswith("session_") and isinstance(value, list)
        )
        sessions = tuple(
            Session(
                f"S{n}",
                locomo_date(conv[f"session_{n}_date_time"]),
                tuple(
                    Turn(t["dia_id"], t["speaker"], locomo_text(t)) for t in conv[f"session_{n}"]
                ),
            )
            for n in numbers
        )
        known = {t.id for s in sessions for t in s.turns}
        questions = []
        for qa in sample["qa"]:
            if qa["category"] not in LOCOMO_CATEGORIES:
                continue
            # Evidence ids come as 'D1:3', 'D:11:26' or 'D8:6; D9:17'; unknown ones are dropped.
            ids = {f"D{a}:{b}" for e in qa["evidence"] for a, b in _DIA.findall(e)} & known
            if ids:
                questions.append(
                    Question(qa["question"], LOCOMO_CATEGORIES[qa["category"]], frozenset(ids))
                )
            else:
                skipped += 1
        conversations.append(Conversation(sample["sample_id"], sessions, tuple(questions)))
    return Dataset("locomo", path, tuple(conversations), skipped)


# --- LongMemEval -------------------------------------------------------------------------


def longmemeval_date(text: str) -> dt.datetime:
    """LongMemEval's '2023/05/20 (Sat) 02:21' (the time may be missing)."""
    text = re.sub(r"\s*\([A-Za-z]+\)", "", text.strip())
    for pattern in ("%Y/%m/%d %H:%M", "%Y/%m/%d"):
        try:
            return dt.datetime.strptime(text, pattern)
        except ValueError:
            continue
    raise ValueError(f"not a LongMemEval date: {text!r}")


def load_longmemeval(items: list[dict], path: Path) -> Dataset:
    conversations, skipped = [], 0
    for item in items:
        qid = str(item["question_id"])
        sessions = []
        for sid, date, turns in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"],
            strict=True,
        ):  # fmt: skip
            sessions.append(
                Session(
                    str(sid),
                    longmemeval_date(date),
                    tuple(
                        Turn(f"{sid}:{i}", t["role"], t["content"].strip())
                        for i, t in enumerate(turns)
                    ),
                )
            )
        evidence = frozenset(
            f"{sid}:{i}"
            for sid, turns in zip(
                item["haystack_session_ids"], item["haystack_sessions"], strict=True
            )
            for i, t in enumerate(turns)
            if t.get("has_answer")
        )
        questions: tuple[Question, ...] = ()
        if evidence and not qid.endswith("_abs"):
            asked = longmemeval_date(item["question_date"]) if item.get("question_date") else None
            questions = (Question(item["question"], item["question_type"], evidence, asked),)
        else:
            skipped += 1
        conversations.append(Conversation(qid, tuple(sessions), questions))
    return Dataset("longmemeval", path, tuple(conversations), skipped)


# --- recognizing a layout ----------------------------------------------------------------

LAYOUTS: dict[str, tuple[Callable[[str], bool], Callable[[list[dict], Path], Dataset]]] = {
    "locomo": (lambda head: '"qa"' in head and '"conversation"' in head, load_locomo),
    "longmemeval": (lambda head: '"haystack_sessions"' in head, load_longmemeval),
}


def layout(path: Path) -> str | None:
    """Which known layout a JSON file has, from its first megabyte; None: none of them."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(_HEAD_BYTES)
    if not head.lstrip().startswith("["):
        return None
    return next((name for name, (looks, _) in LAYOUTS.items() if looks(head)), None)


def load(path: Path) -> Dataset | None:
    """The data set in `path`, or None if its layout is not one of `LAYOUTS`."""
    name = layout(path)
    if name is None:
        return None
    items = json.loads(path.read_text(encoding="utf-8"))
    try:
        return LAYOUTS[name][1](items, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: looks like {name} but is not: {exc!r}") from exc


def find_datasets(root: Path) -> Iterator[Dataset]:
    """Every data set under `root` (JSON files of a known layout), LoCoMo first."""
    found = [(p, layout(p)) for p in sorted(root.rglob("*.json"))]
    found.sort(key=lambda pair: (pair[1] != "locomo", str(pair[0])))
    for path, name in found:
        if name is not None:
            dataset = load(path)
            if dataset is not None:
                yield dataset
