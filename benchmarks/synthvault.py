#!/usr/bin/env python3
"""Deterministic synthetic Markdown vault generator for vaultctx benchmarks.

Standard library only.  Same arguments -> byte-identical files (on any
platform; the sampler is endian-independent).

    from benchmarks.synthvault import generate_vault, generate_queries, edit_note
    stats = generate_vault(Path("/tmp/vault"), 10_000, seed=0)
    queries = generate_queries(200, seed=1)
    edit_note(Path("/tmp/vault"), 42)            # for incremental re-index runs

CLI::

    python benchmarks/synthvault.py OUT_DIR --notes N [--seed S]   # prints stats JSON

What a vault looks like
-----------------------
* ``area-NNN/topic-NNNNN <word> <word>.md`` spread over ~sqrt(n)/2 folders.
  The note's link name is its file stem, e.g. ``topic-00042 velora mantik``,
  and the ``# Title`` heading repeats that stem.
* ~60% of notes have YAML frontmatter (``tags: [..]``, ``created:``, and for
  ~10% of all notes ``aliases: [..]``).
* 2-6 ``##``/``###`` sections (≈5% of notes are long: 20-40 sections), each
  1-4 paragraphs of 20-120 words; occasional bullet lists, fenced code blocks,
  inline ``#tags`` and a short intro paragraph under the title.
* Word frequencies: Zipf–Mandelbrot, ``p(rank) ∝ (rank + 2.7) ** -1.07`` over
  ``vocab_size`` pseudo-words plus ~150 real English stop/common words placed
  at realistic ranks ("the" ≈ 4-5% of tokens, stop-words ≈ 40% of tokens).
  The vocabulary depends only on ``vocab_size`` (never on ``seed``), and the
  vocabulary for a smaller ``vocab_size`` is a prefix of a larger one, so
  queries from :func:`generate_queries` match any vault with the same
  ``vocab_size``.
* ``link_density`` wiki-links per note on average (Poisson), targets chosen by
  preferential attachment (Price model: hubs emerge).  Forms: ``[[T]]``,
  ``[[T|alias]]``, ``[[T#Section]]`` (a real heading of T), ``![[T]]`` embeds
  on their own line, and ~2% dangling links to 3-word names that match no
  note (nor any alias).
* ``SynthStats.blocks_estimate`` counts the blocks a heading-section chunker
  with 200-token chunks makes (the ``# Title`` section included); on these
  notes it equals what vaultctx's parser produces at its default
  ``chunk_tokens``.  ``blocks_to_notes`` inverts it (~9.7 blocks per note).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import date
from functools import lru_cache
from itertools import accumulate, compress
from operator import getitem
from pathlib import Path
from random import Random

_BIG_ENDIAN = sys.byteorder == "big"
_consume = deque(maxlen=0).extend

__all__ = [
    "ZIPF_S",
    "SynthStats",
    "blocks_to_notes",
    "edit_note",
    "generate_queries",
    "generate_vault",
    "note_stem",
]

ZIPF_S = 1.07  # Zipf exponent
ZIPF_Q = 2.7  # Mandelbrot offset: flattens the head to English-like
CHUNK_TOKENS = 200  # blocks_estimate mirrors vaultctx's default chunk_tokens (words + punctuation)
LONG_NOTE_P = 0.05
LONG_SECTIONS = (20, 40)
FRONTMATTER_P = 0.60
ALIAS_P = 0.10  # of all notes (all of them inside frontmatter)
INTRO_P = 0.40
PA_COPY_P = 0.5  # Price model: P(copy an earlier link's target) vs uniform
N_TAGS = 200

# ~150 English stop-words and very common words, roughly in frequency order.
# ("i" left out: it would be rendered lowercase.)
_STOP_WORDS = """
the of and to a in is that for it as was with be by on not he this are or his
from at which but have an they you were her she there been one all we their has
would when if so no will more can who out up into do its about time only some
could them these may than other then new any like also two what most over such
our well between first very just because made way even many after those through
where much how before should each must still same own here used both work use
while make part during three under world without people system data back since
year years find good long against another being life right day off state number
however under often while place set point few around without again within group
take know based different change large information process small use case need
""".split()


# --------------------------------------------------------------------------- #
# Vocabulary and samplers
# --------------------------------------------------------------------------- #

_ONSETS = (
    "b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr st sk sl "
    "pl bl cl fl gl sh ch th sp qu"
).split()
_ONSET_W = [
    6,
    6,
    7,
    4,
    4,
    3,
    1,
    5,
    7,
    7,
    7,
    5,
    7,
    8,
    8,
    4,
    2,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
    2,
    2,
    1,
    1,
    1,
    1,
    1,
    1,
    1,
    2,
    2,
    1,
    1,
    1,
]
_VOWELS = "a e i o u a e i o a e o ai ou ea io ia y".split()
_CODAS = ([""] * 10) + "n r l s m t x k nd rt st nt ls rk".split()


def _unique_words(stop: set[str]) -> Iterator[str]:
    """Deterministic infinite-ish stream of unique pronounceable pseudo-words;
    frequent (low-rank) words are shorter."""
    rng = Random("vaultctx-synthvault-vocab-v1")
    onset_cw = list(accumulate(_ONSET_W))
    seen = set(stop)
    out: list[str] = []
    rank = 0
    while True:
        # syllable count grows slowly with rank: 1-2 for the head, 2-4 in the tail
        lo = 1 if rank < 400 else 2
        hi = 2 if rank < 60 else (3 if rank < 3000 else 4)
        nsyl = rng.randint(lo, hi)
        parts = []
        for j in range(nsyl):
            use_onset = j or rng.random() < 0.85
            onset = rng.choices(_ONSETS, cum_weights=onset_cw)[0] if use_onset else ""
            coda = rng.choice(_CODAS) if (j == nsyl - 1 or rng.random() < 0.25) else ""
            parts.append(onset + rng.choice(_VOWELS) + coda)
        w = "".join(parts)
        if len(w) < 3 or len(w) > 14 or w in seen:
            continue
        seen.add(w)
        out.append(w)
        rank += 1
        yield w


def _quantise(weights: list[float], size: int, min_count: int) -> list[int]:
    """Integer slot counts summing to ``size``, proportional to ``weights``
    (largest-remainder rounding, each at least ``min_count``)."""
    total = sum(weights)
    exact = [w * size / total for w in weights]
    counts = [max(min_count, int(e)) for e in exact]
    diff = size - sum(counts)
    if diff > 0:
        order = sorted(range(len(counts)), key=lambda j: (counts[j] - exact[j], j))
        for j in order[:diff]:
            counts[j] += 1
    elif diff < 0:
        order = sorted(range(len(counts)), key=lambda j: (exact[j] - counts[j], j))
        for j in order:
            if diff == 0:
                break
            if counts[j] > min_count:
                counts[j] -= 1
                diff += 1
    assert sum(counts) == size
    return counts


class _Sampler:
    """Fast i.i.d. weighted sampling of many items at once, all inner loops in C.

    ``rng.choices(cum_weights=...)`` costs ~0.35 µs per draw (a Python-level
    bisect per item).  Here a draw is a lookup in a 2**16-slot table (512 KiB,
    stays in cache) indexed by 16 random bits:

    * frequent items (expected slot count >= 4: the top ~1,600 words, ~77% of
      tokens for the default vocabulary) get round(expected) slots
      (<= 12.5% relative error, far less for the top words);
    * the rare items, in weight order, are cut into bands of exactly 256;
      the band mass gets a block of slots at the top of the table (a multiple
      of 256 slots, so a hit is visible in the index's high byte).  Draws
      landing there are redrawn as (band from a 2**16 band table, uniform
      item within band from one random byte).  Within a band weights differ
      by <= ~17% (<= ~5% beyond rank 5,000).

    Measured frequencies match the Zipf weights within ~1% per rank band;
    ~4x faster than ``choices``.  Deterministic for a given Random state.
    """

    BITS = 16
    MIN_SLOTS = 4.0
    BAND = 256
    BAND_TABLE_BITS = 12  # 4096-slot band table (32 KiB): ~56 slots per band

    def __init__(self, items: list[str], weights: list[float]):
        self.items = items
        self.cum = list(accumulate(weights))
        n = len(items)
        size = 1 << self.BITS
        total = self.cum[-1]
        order = sorted(range(n), key=lambda i: (-weights[i], i))
        n_rare = sum(1 for w in weights if w * size / total < self.MIN_SLOTS)
        self.bands: list[tuple[str, ...]] | None = None
        if n_rare and n >= 2 * self.BAND:
            n_bands = -(-n_rare // self.BAND)
            n_rare = min(n_bands * self.BAND, (n // self.BAND - 1) * self.BAND)
            n_bands = n_rare // self.BAND
        else:
            n_rare = n_bands = 0
        head, rare = order[: n - n_rare], order[n - n_rare :]
        rare_slots = 0
        if rare:
            rare_w = sum(weights[i] for i in rare)
            rare_slots = max(1, round(rare_w * size / total / 256.0)) * 256
        counts = _quantise([weights[i] for i in head], size - rare_slots, 1)
        table: list[str | None] = []
        for j, c in zip(head, counts, strict=True):
            table.extend([items[j]] * c)
        table.extend([None] * rare_slots)
        self.table = table
        if rare:
            hb0 = (size - rare_slots) >> 8
            self.flag_tr = bytes(1 if b >= hb0 else 0 for b in range(256))
            B = self.BAND
            bands = [tuple(items[i] for i in rare[b * B : (b + 1) * B]) for b in range(n_bands)]
            band_w = [sum(weights[i] for i in rare[b * B : (b + 1) * B]) for b in range(n_bands)]
            band_table: list[tuple[str, ...]] = []
            bsize = 1 << self.BAND_TABLE_BITS
            for band, c in zip(bands, _quantise(band_w, bsize, 1), strict=True):
                band_table.extend([band] * c)
            self.bands = band_table
            self.band_mask_tr = bytes(b & ((bsize >> 8) - 1) for b in range(256))

    def sample(self, rng: Random, k: int) -> list[str]:
        if k <= 0:
            return []
        raw = rng.randbytes(2 * k)
        idx = array("H")
        idx.frombytes(raw)
        if _BIG_ENDIAN:  # pragma: no cover - keep output platform-independent
            idx.byteswap()
        out = list(map(self.table.__getitem__, idx))
        if self.bands is not None:
            flags = raw[1::2].translate(self.flag_tr)  # high byte of each index
            m = flags.count(1)
            if m:
                raw2 = bytearray(rng.randbytes(3 * m))
                raw2[1 : 2 * m : 2] = raw2[1 : 2 * m : 2].translate(self.band_mask_tr)
                bidx = array("H")
                bidx.frombytes(raw2[: 2 * m])
                if _BIG_ENDIAN:  # pragma: no cover
                    bidx.byteswap()
                rare = map(getitem, map(self.bands.__getitem__, bidx), raw2[2 * m :])
                # out[pos] = rare word for every flagged pos, in C
                _consume(map(out.__setitem__, compress(range(k), flags), rare))
        return out  # type: ignore[return-value]

    def one(self, rng: Random) -> str:
        return self.items[bisect_right(self.cum, rng.random() * self.cum[-1])]


@dataclass(frozen=True)
class _Vocab:
    words: list[str]  # all words by rank (stop-words interleaved)
    content: list[str]  # pseudo-words only, by rank
    text: _Sampler  # running text: all words, Zipf
    content_s: _Sampler  # content words only, Zipf
    stop_s: _Sampler  # stop-words only, Zipf
    caps: dict[str, str]  # word -> Capitalised


def _stop_rank(j: int) -> int:
    # stop-word j (0 = most frequent) sits at overall rank ~ j*(1+j/90):
    # the top ~20 are (almost) contiguous, the rest spread out to rank ~400.
    return int(j * (1 + j / 90))


@lru_cache(maxsize=8)
def _vocab(vocab_size: int) -> _Vocab:
    if vocab_size < 10:
        raise ValueError("vocab_size must be >= 10")
    stop = list(dict.fromkeys(_STOP_WORDS))  # dedupe, keep order
    gen = _unique_words(set(stop))
    content = [next(gen) for _ in range(vocab_size)]
    total = len(stop) + vocab_size
    slots: list[str | None] = [None] * total
    for j, w in enumerate(stop):
        r = min(_stop_rank(j), total - 1)
        while slots[r] is not None:
            r += 1
        slots[r] = w
    # fresh, contiguously allocated copies of every word: the samplers touch
    # these objects at random, and locality matters for speed
    fresh = {w: (w + " ")[:-1] for w in stop}
    stop = [fresh[w] for w in stop]
    content = [(w + " ")[:-1] for w in content]
    it = iter(content)
    words = [fresh[s] if s is not None else next(it) for s in slots]
    weights = [(r + 1 + ZIPF_Q) ** -ZIPF_S for r in range(total)]
    stop_set = set(stop)
    cw = [w for word, w in zip(words, weights, strict=True) if word not in stop_set]
    sw = [w for word, w in zip(words, weights, strict=True) if word in stop_set]
    stop_by_rank = [word for word in words if word in stop_set]
    return _Vocab(
        words=words,
        content=content,
        text=_Sampler(words, weights),
        content_s=_Sampler(content, cw),
        stop_s=_Sampler(stop_by_rank, sw),
        caps={w: w[:1].upper() + w[1:] for w in words},
    )


@lru_cache(maxsize=4)
def _tag_pool(vocab_size: int) -> tuple[list[str], list[float]]:
    rng = Random("vaultctx-synthvault-tags-v1")
    voc = _vocab(vocab_size)
    pool: list[str] = []
    seen: set[str] = set()
    parents = ["project", "area", "status", "type", "topic"]
    while len(pool) < N_TAGS:
        w = voc.content[rng.randrange(min(len(voc.content), 3000))]
        r = rng.random()
        if r < 0.12:
            t = f"{rng.choice(parents)}/{w}"
        elif r < 0.2:
            t = f"{w}-{voc.content[rng.randrange(min(len(voc.content), 3000))]}"
        else:
            t = w
        if t not in seen:
            seen.add(t)
            pool.append(t)
    cw = list(accumulate((k + 1) ** -ZIPF_S for k in range(N_TAGS)))
    return pool, cw


# --------------------------------------------------------------------------- #
# Note planning (structure only; cheap) and rendering
# --------------------------------------------------------------------------- #


def _cap(w: str) -> str:
    return w[:1].upper() + w[1:] if w[:1].islower() else w


def _poisson(rng: Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    L = math.exp(-lam)
    k, p = 0, 1.0
    while True:
        p *= rng.random()
        if p <= L:
            return k
        k += 1


@dataclass
class _Plan:
    index: int
    folder: int
    stem: str
    headings: list[tuple[int, str]]  # (level, text)
    paragraphs: list[list[int]]  # per section: word counts of its paragraphs
    intro: int  # intro paragraph word count (0 = none)
    frontmatter: bool
    aliases: list[str]


def _plan_sections(rng: Random, voc: _Vocab, sections_per_note: tuple[int, int]):
    lo, hi = sections_per_note
    n_sec = _n_sections(rng, lo, hi)
    head_words = voc.content_s.sample(rng, n_sec * 4)
    headings: list[tuple[int, str]] = []
    used: set[str] = set()
    for s in range(n_sec):
        nw = 1 + int(rng.random() * 4)
        text = " ".join(head_words[4 * s : 4 * s + nw])
        text = _cap(text)
        base, k = text, 2
        while text.lower() in used:
            text = f"{base} {k}"
            k += 1
        used.add(text.lower())
        level = 2 if (s == 0 or rng.random() < 0.7) else 3
        headings.append((level, text))
    return headings, _para_counts(rng.random, n_sec)


def _n_sections(rng: Random, lo: int, hi: int) -> int:
    """lo..hi sections; LONG_NOTE_P of notes are long (LONG_SECTIONS)."""
    if rng.random() < LONG_NOTE_P:
        return rng.randint(*LONG_SECTIONS)
    return rng.randint(lo, hi)


def _para_counts(rnd, n_sec: int) -> list[list[int]]:
    """Per section: 1-4 paragraphs of 20-120 words."""
    return [[20 + int(rnd() * 101) for _ in range(1 + int(rnd() * 4))] for _ in range(n_sec)]


_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def _ntok(text: str) -> int:
    """Token count as vaultctx's parser estimates it: words and punctuation marks."""
    return len(_TOKEN_RE.findall(text))


def _pack(tokens: list[int], limit: int = CHUNK_TOKENS) -> int:
    """Chunks a heading section becomes when its paragraphs (token counts) are
    packed greedily up to ``limit`` tokens; an over-long paragraph is split.
    A section always yields at least one block (vaultctx keeps empty ones)."""
    blocks = buf = 0
    for t in tokens:
        if t > limit:
            blocks += (1 if buf else 0) + -(-t // limit)
            buf = 0
            continue
        if buf and buf + t > limit:
            blocks += 1
            buf = 0
        buf += t
    return max(1, blocks + (1 if buf else 0))


def _make_plan(
    seed: int, i: int, width: int, n_folders: int, voc: _Vocab, sections_per_note: tuple[int, int]
) -> _Plan:
    rng = Random(f"plan/{seed}/{i}")
    folder = rng.randrange(n_folders)
    tw = voc.content_s.sample(rng, 4)
    stem = f"topic-{i:0{width}d} {tw[0]} {tw[1]}"
    headings, paragraphs = _plan_sections(rng, voc, sections_per_note)
    intro = rng.randint(15, 60) if rng.random() < INTRO_P else 0
    fm = rng.random() < FRONTMATTER_P
    aliases: list[str] = []
    if fm and rng.random() < ALIAS_P / FRONTMATTER_P:
        aliases.append(f"{_cap(tw[2])} {_cap(tw[3])}")
        if rng.random() < 0.25:
            aliases.append(f"{_cap(tw[1])} {tw[0]}")
    return _Plan(i, folder, stem, headings, paragraphs, intro, fm, aliases)


_CODE_TEMPLATES = [
    (
        "python",
        'def {a}_{b}({c}, {d}=None):\n    """{e} {f}."""\n'
        "    {g} = [{c} for {c} in {d} or []]\n    return len({g})\n",
    ),
    ("bash", '{a} --{b} {c}.txt | grep -i {d} > {e}.log\necho "{f} done"\n'),
    ("json", '{{\n  "{a}": "{b}",\n  "{c}": [1, 2, 3],\n  "{d}": {{"{e}": true}}\n}}\n'),
    ("sql", "SELECT {a}, count(*) FROM {b}\nWHERE {c} = '{d}'\nGROUP BY {a};\n"),
    ("", "{a} = {b}\n{c} -> {d}\n{e}: {f} {g}\n"),
]


_SENT_LEN = tuple(5 + (b * 14 >> 8) for b in range(256))  # 5..18 words
_PUNCT = tuple("." if b < 236 else ("?" if b < 249 else "!") for b in range(256))


class _Renderer:
    def __init__(self, voc: _Vocab, tags: tuple[list[str], list[float]]):
        self.voc = voc
        self.tag_pool, self.tag_cw = tags
        self.cap = voc.caps

    def tag(self, rng: Random) -> str:
        return rng.choices(self.tag_pool, cum_weights=self.tag_cw)[0]

    def paragraph(self, rng: Random, words: list[str], inserts: list[str]) -> tuple[str, int]:
        """Turn a flat word list into capitalised, punctuated sentences of
        5-18 words (edits tokens in place, one join per paragraph; the
        per-sentence randomness comes from one randbytes() call).
        Returns (text, token estimate)."""
        n = len(words)
        tokens = n + sum(map(_ntok, inserts)) if inserts else n
        for ins in inserts:
            words.insert(1 + int(rng.random() * len(words)), ins)
        n = len(words)
        if not n:
            return "", 0
        rb = rng.randbytes(3 * (n // 5 + 1))
        cap = self.cap.get
        i = s = 0
        while True:
            w = words[i]
            words[i] = cap(w, w)
            j = i + _SENT_LEN[rb[s]]
            if n - j < 4:
                j = n
            c = rb[s + 1]
            if c < 115 and j - i > 8:  # ~45% of longer sentences get a comma
                words[i + 2 + c % (j - i - 4)] += ","
                tokens += 1
            words[j - 1] += _PUNCT[rb[s + 2]]
            tokens += 1
            if j >= n:
                return " ".join(words), tokens
            i = j
            s += 3

    def bullets(self, rng: Random) -> str:
        k = rng.randint(2, 6)
        task = rng.random() < 0.2
        words = self.voc.text.sample(rng, 12 * k)
        lines = []
        for j in range(k):
            nw = rng.randint(3, 12)
            item = words[12 * j : 12 * j + nw]
            item[0] = _cap(item[0])
            prefix = ("- [x] " if rng.random() < 0.4 else "- [ ] ") if task else "- "
            lines.append(prefix + " ".join(item))
        return "\n".join(lines)

    def code(self, rng: Random) -> str:
        lang, tpl = _CODE_TEMPLATES[rng.randrange(len(_CODE_TEMPLATES))]
        w = self.voc.content_s.sample(rng, 7)
        body = tpl.format(a=w[0], b=w[1], c=w[2], d=w[3], e=w[4], f=w[5], g=w[6])
        return f"```{lang}\n{body}```"

    def body(self, rng: Random, plan: _Plan, links: list[tuple[str, bool]]) -> tuple[str, int]:
        """Render title + intro + sections.  ``links`` are (markdown, is_embed).

        Returns (markdown, blocks): blocks is what a heading-section chunker
        with CHUNK_TOKENS-token chunks makes of it (the ``# Title`` section
        counts, even when empty, as vaultctx's parser does)."""
        text_s = self.voc.text
        # distribute links over paragraphs (embeds go on their own line after it)
        n_par = sum(len(p) for p in plan.paragraphs) + (1 if plan.intro else 0)
        inline: dict[int, list[str]] = {}
        embeds: dict[int, list[str]] = {}
        for md, is_embed in links:
            k = int(rng.random() * n_par)
            (embeds if is_embed else inline).setdefault(k, []).append(md)
        total_words = plan.intro + sum(sum(p) for p in plan.paragraphs)
        pool = text_s.sample(rng, total_words)
        pos = 0
        parts = [f"# {plan.stem}\n"]
        pidx = 0
        sec_tokens: list[int] = []  # paragraph token counts of the current section
        blocks = 0

        def para(wc: int) -> str:
            nonlocal pos, pidx
            words = pool[pos : pos + wc]
            pos += wc
            ins = inline.get(pidx, [])
            if rng.random() < 0.025:
                ins = [*ins, "#" + self.tag(rng)]
            p, tok = self.paragraph(rng, words, ins)
            sec_tokens.append(tok)
            em = embeds.get(pidx)
            if em:
                line = "\n".join(em)
                p += "\n\n" + line
                sec_tokens.append(_ntok(line))
            pidx += 1
            return p

        if plan.intro:
            parts.append(para(plan.intro) + "\n")
        for (level, heading), paras in zip(plan.headings, plan.paragraphs, strict=True):
            blocks += _pack(sec_tokens)
            sec_tokens.clear()
            parts.append(f"{'#' * level} {heading}\n")
            nparas = len(paras)
            for j, wc in enumerate(paras):
                parts.append(para(wc) + "\n")
                if j == nparas - 1 or rng.random() < 0.5:
                    r = rng.random()
                    extra = None
                    if r < 0.08:
                        extra = self.bullets(rng)
                    elif r < 0.105:
                        extra = self.code(rng)
                    if extra is not None:
                        parts.append(extra + "\n")
                        sec_tokens.append(_ntok(extra))
        blocks += _pack(sec_tokens)
        return "\n".join(parts), blocks

    def frontmatter(self, rng: Random, plan: _Plan) -> str:
        if not plan.frontmatter:
            return ""
        lines = ["---"]
        nt = rng.choices((0, 1, 2, 3, 4), cum_weights=(1, 5, 8, 10, 11))[0]
        tags = list(dict.fromkeys(self.tag(rng) for _ in range(nt)))
        if tags:
            lines.append(f"tags: [{', '.join(tags)}]")
        if plan.aliases:
            lines.append(f"aliases: [{', '.join(plan.aliases)}]")
        # created: drawn from the per-note text rng
        day = int(rng.random() * 2200)
        lines.append(f"created: {date.fromordinal(_EPOCH + day).isoformat()}")
        lines.append("---\n")
        return "\n".join(lines)


_EPOCH = date(2020, 1, 1).toordinal()


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class SynthStats:
    notes: int
    # blocks a heading-section chunker makes at CHUNK_TOKENS (=200) tokens per chunk,
    # title section included: equals vaultctx's parser at its default chunk_tokens
    blocks_estimate: int
    links: int  # wiki-links written (incl. embeds and dangling ones)
    bytes: int  # total bytes of all .md files written


def _width(n_notes: int) -> int:
    return max(5, len(str(max(0, n_notes - 1))))


def _n_folders(n_notes: int) -> int:
    return max(1, round(math.sqrt(n_notes) / 2))


_SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9 \-]*\.md$")


def _safe_dir(root_res: Path, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    dr = d.resolve()
    if dr != root_res and root_res not in dr.parents:
        raise RuntimeError(f"refusing to write outside {root_res}: {dr}")
    return d


_O_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_TRUNC
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_BINARY", 0)
)


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``; never follows a symlink at ``path``."""
    fd = os.open(path, _O_FLAGS, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def note_stem(root: Path, index: int) -> str:
    """Link name (file stem) of note ``index`` in an existing generated vault."""
    return _find_note(Path(root), index).stem


def _build(
    n_notes: int,
    seed: int,
    sections_per_note: tuple[int, int],
    link_density: float,
    vocab_size: int,
) -> tuple[list[_Plan], list[list[tuple[str, bool]]], int]:
    """Plans (names, headings, structure) of all notes + their outgoing links."""
    voc = _vocab(vocab_size)
    width = _width(n_notes)
    n_folders = _n_folders(n_notes)

    # pass 1: structure of every note (names + headings are needed by linkers)
    plans = [_make_plan(seed, i, width, n_folders, voc, sections_per_note) for i in range(n_notes)]

    # pass 2: link graph, preferential attachment (Price model)
    grng = Random(f"links/{seed}")
    chosen: list[int] = []
    out_links: list[list[tuple[str, bool]]] = []
    n_links = 0
    for i in range(n_notes):
        mine: list[tuple[str, bool]] = []
        k = _poisson(grng, link_density) if n_notes > 1 else 0
        for _ in range(k):
            r = grng.random()
            if r < 0.02:  # dangling: 3 words, so no stem ("topic-...") nor 2-word alias matches
                w = voc.content_s.sample(grng, 3)
                mine.append((f"[[{_cap(w[0])} {w[1]} {w[2]}]]", False))
                n_links += 1
                continue
            for _try in range(4):
                if chosen and grng.random() < PA_COPY_P:
                    t = chosen[grng.randrange(len(chosen))]
                else:
                    t = grng.randrange(n_notes)
                if t != i:
                    break
            if t == i:
                continue
            chosen.append(t)
            tp = plans[t]
            f = grng.random()
            if f < 0.04:
                mine.append((f"![[{tp.stem}]]", True))
            elif f < 0.16:
                h = tp.headings[grng.randrange(len(tp.headings))][1]
                mine.append((f"[[{tp.stem}#{h}]]", False))
            elif f < 0.34:
                if tp.aliases and grng.random() < 0.6:
                    alias = tp.aliases[0]
                else:
                    alias = " ".join(tp.stem.split(" ")[1:])
                mine.append((f"[[{tp.stem}|{alias}]]", False))
            else:
                mine.append((f"[[{tp.stem}]]", False))
            n_links += 1
        out_links.append(mine)

    return plans, out_links, n_links


def _render(
    plans: list[_Plan], out_links: list[list[tuple[str, bool]]], seed: int, vocab_size: int
) -> Iterator[tuple[_Plan, bytes, int]]:
    """(plan, file bytes, blocks) per note."""
    rend = _Renderer(_vocab(vocab_size), _tag_pool(vocab_size))
    for plan, links in zip(plans, out_links, strict=True):
        rng = Random(f"text/{seed}/{plan.index}")
        front = rend.frontmatter(rng, plan)
        body, n_blocks = rend.body(rng, plan, links)
        yield plan, (front + body).encode("utf-8"), n_blocks


def generate_vault(
    root: Path,
    n_notes: int,
    *,
    seed: int = 0,
    sections_per_note: tuple[int, int] = (2, 6),
    link_density: float = 3.0,
    vocab_size: int = 20000,
) -> SynthStats:
    """Write ``n_notes`` notes under ``root`` (created if missing; nothing is
    written outside it, nothing existing is deleted) and return stats."""
    if n_notes < 0:
        raise ValueError("n_notes must be >= 0")
    lo, hi = sections_per_note
    if not (1 <= lo <= hi):
        raise ValueError("sections_per_note must be (lo, hi) with 1 <= lo <= hi")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    root_res = root.resolve()
    plans, out_links, n_links = _build(n_notes, seed, (lo, hi), link_density, vocab_size)

    # pass 3: render + write
    dirs: dict[int, Path] = {}
    total_bytes = 0
    blocks = 0
    for plan, data, n_blocks in _render(plans, out_links, seed, vocab_size):
        d = dirs.get(plan.folder)
        if d is None:
            d = dirs[plan.folder] = _safe_dir(root_res, root / f"area-{plan.folder:03d}")
        name = plan.stem + ".md"
        assert _SAFE_NAME.match(name), name
        _write_new(d / name, data)
        total_bytes += len(data)
        blocks += n_blocks
    return SynthStats(notes=n_notes, blocks_estimate=blocks, links=n_links, bytes=total_bytes)


def generate_queries(
    n: int, *, seed: int = 1, vocab_size: int = 20000, min_words: int = 3, max_words: int = 12
) -> list[str]:
    """``n`` search queries (mean ≈ 7 words for 3..12) from the vault's Zipf
    vocabulary: ~82% content words, ~18% stop-words, ~5% of queries contain a
    quoted two-word phrase."""
    if not (1 <= min_words <= max_words):
        raise ValueError("need 1 <= min_words <= max_words")
    voc = _vocab(vocab_size)
    rng = Random(f"queries/{seed}")
    span = max_words - min_words
    p = min(1.0, max(0.0, (7 - min_words) / span)) if span else 0.0
    out: list[str] = []
    for _ in range(n):
        ln = min_words + sum(1 for _ in range(span) if rng.random() < p)
        content = voc.content_s.sample(rng, ln)
        words: list[str] = []
        for j in range(ln):
            w = voc.stop_s.one(rng) if j > 0 and rng.random() < 0.18 else content[j]
            if words and words[-1] == w:
                w = content[j]
                if words[-1] == w:
                    w = voc.content[rng.randrange(len(voc.content))]
            words.append(w)
        if ln >= 2 and rng.random() < 0.05:
            j = rng.randrange(ln - 1)
            words[j : j + 2] = [f'"{content[j]} {content[j + 1]}"']
        out.append(" ".join(words))
    return out


_LINK_RE = re.compile(r"!?\[\[[^\[\]\n]+\]\]")
_HEADING_RE = re.compile(r"^(#{2,6}) (.+)$")


def _find_note(root: Path, index: int) -> Path:
    for width in range(5, 9):
        hits = sorted(root.glob(f"area-*/topic-{index:0{width}d} *.md"))
        if hits:
            return hits[0]
    raise FileNotFoundError(f"no generated note with index {index} under {root}")


def edit_note(root: Path, index: int, *, seed: int = 2, vocab_size: int = 20000) -> Path:
    """Rewrite note ``index``'s body text in place and return its path.

    Keeps: file name, frontmatter, ``# Title``, the section headings (so
    ``[[T#Section]]`` links into it stay valid) and its outgoing wiki-links
    (re-inserted at new positions).  Paragraph text, lists and code blocks are
    regenerated.  The new text is a deterministic function of (seed, index,
    current file content), so calling it twice changes the note twice.  The
    mtime is guaranteed to move forward (>= 1 ms) even on fast repeats.
    """
    root = Path(root)
    root_res = root.resolve()
    path = _find_note(root, index)
    pres = path.resolve()
    if root_res not in pres.parents:
        raise RuntimeError(f"refusing to write outside {root_res}: {pres}")
    old = path.read_text(encoding="utf-8")
    old_mtime = path.stat().st_mtime_ns

    front = ""
    rest = old
    if old.startswith("---\n"):
        end = old.find("\n---\n", 4)
        if end != -1:
            front = old[: end + 5]
            rest = old[end + 5 :]
    # headings outside code fences
    headings: list[tuple[int, str]] = []
    in_fence = False
    for line in rest.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = _HEADING_RE.match(line)
        if m:
            headings.append((len(m.group(1)), m.group(2)))
    links = [(m.group(0), m.group(0).startswith("!")) for m in _LINK_RE.finditer(rest)]

    voc = _vocab(vocab_size)
    rend = _Renderer(voc, _tag_pool(vocab_size))
    digest = hashlib.sha256(old.encode("utf-8")).hexdigest()[:16]
    rng = Random(f"edit/{seed}/{index}/{digest}")
    if not headings:
        headings = [(2, "Notes")]
    paragraphs = _para_counts(rng.random, len(headings))
    intro = rng.randint(15, 60) if rng.random() < INTRO_P else 0
    plan = _Plan(index, 0, path.stem, headings, paragraphs, intro, False, [])
    text = front + rend.body(rng, plan, links)[0]
    if text == old:  # astronomically unlikely; keep the "content changed" promise
        text += "\n"
    if path.is_symlink():
        raise RuntimeError(f"refusing to rewrite a symlink: {path}")
    tmp = path.with_name(path.name + ".synthvault-tmp")
    _write_new(tmp, text.encode("utf-8"))
    os.replace(tmp, path)
    new_mtime = max(time.time_ns(), old_mtime + 1_000_000)
    os.utime(path, ns=(new_mtime, new_mtime))
    return path


@lru_cache(maxsize=16)
def _mean_blocks_per_note(sections_per_note: tuple[int, int]) -> float:
    """1 title block + E[#sections] * (blocks per section).  E[#sections] is
    exact; blocks per section is measured by rendering (not writing) a small
    calibration vault with the very same code (~0.3 s, once per process).
    Stratifying like this removes the large note-to-note variance caused by
    the long notes (~1% error instead of ~4%)."""
    lo, hi = sections_per_note
    n = 600
    plans, links, _ = _build(n, 424242, (lo, hi), 3.0, 20000)
    blocks = sum(b for _, _, b in _render(plans, links, 424242, 20000))
    sections = sum(len(p.headings) for p in plans)
    per_section = (blocks - n) / sections
    e_sections = (1 - LONG_NOTE_P) * (lo + hi) / 2 + LONG_NOTE_P * sum(LONG_SECTIONS) / 2
    return 1 + e_sections * per_section


def blocks_to_notes(n_blocks: int, sections_per_note: tuple[int, int] = (2, 6)) -> int:
    """Number of notes for which generate_vault's blocks_estimate ≈ n_blocks."""
    if n_blocks <= 0:
        return 0
    return max(1, round(n_blocks / _mean_blocks_per_note(tuple(sections_per_note))))


# --------------------------------------------------------------------------- #
# Hostile files
# --------------------------------------------------------------------------- #

HOSTILE_DIR = "hostile"
BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)
"""Nine levels of YAML aliases in under 400 bytes: 9**9 strings once expanded."""


@dataclass(frozen=True)
class HostileFile:
    """One pathological file: its name (bytes: it may not be UTF-8), its content, the
    word its text holds, and whether vaultctx indexes it (as text) or skips it."""

    kind: str
    name: bytes
    data: bytes
    marker: str
    indexed: bool = True


def _hostile_note(kind: str, name: str, front: str | None, body: str = "") -> HostileFile:
    marker = "hostile" + re.sub(r"[^a-z0-9]", "", kind.lower())
    text = f"# {kind}\n\nThe {marker} note. {body}\n"
    if front is not None:
        text = f"---\n{front}---\n{text}"
    return HostileFile(kind, f"{HOSTILE_DIR}/{name}.md".encode(), text.encode(), marker)


def hostile_files(huge_bytes: int = 2_000_000) -> list[HostileFile]:
    """One of each file a messy vault holds that once stopped or stalled the index."""
    paragraph = "Frames of capped brood were checked on a warm still morning. " * 5
    count = huge_bytes // (len(paragraph) + 16)  # each entry its own text: its own vector
    huge = "\n\n".join(f"Entry {i}. {paragraph}" for i in range(count))
    invalid = _hostile_note("invalid UTF-8", "Invalid UTF-8", None)
    return [
        _hostile_note("invalid date", "Invalid date", "date: 2023-02-30\n"),
        _hostile_note("month 13", "Month 13", "date: 2023-13-01\n"),
        _hostile_note("huge integer", "Huge integer", f"n: {'9' * 5000}\n"),
        _hostile_note("alias bomb", "Alias bomb", BILLION_LAUGHS),
        _hostile_note("deep YAML", "Deep YAML", "a: " + "[" * 50_000 + "]" * 50_000 + "\n"),
        _hostile_note("broken frontmatter", "Broken frontmatter", "tags: [a, b\ntitle: x\n"),
        _hostile_note("huge note", "Huge note", None, huge),
        HostileFile(
            invalid.kind, invalid.name, invalid.data + b"caf\xe9 \xff\xfe\n", invalid.marker
        ),
        HostileFile(
            "binary file",
            f"{HOSTILE_DIR}/Binary.md".encode(),
            bytes(range(256)) * 64,
            "",
            indexed=False,
        ),
        HostileFile(
            "non-UTF-8 name",
            f"{HOSTILE_DIR}/Caf".encode() + b"\xe9 latin-1.md",
            b"# Latin-1\n\nThe hostilename note.\n",
            "hostilename",
            indexed=False,
        ),
    ]


def write_hostile_files(root: Path, files: list[HostileFile] | None = None) -> list[HostileFile]:
    """Write `files` (default: one of each hostile file) under `root`; returns them."""
    files = hostile_files() if files is None else files
    base = os.fsencode(Path(root))
    os.makedirs(os.path.join(base, HOSTILE_DIR.encode()), exist_ok=True)
    for f in files:
        with open(os.path.join(base, f.name), "wb") as fh:
            fh.write(f.data)
    return files


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate a deterministic synthetic Markdown vault.")
    ap.add_argument("out_dir", type=Path)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--notes", type=int, help="number of notes")
    g.add_argument("--blocks", type=int, help="approximate number of blocks (notes derived)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--link-density", type=float, default=3.0)
    ap.add_argument("--vocab-size", type=int, default=20000)
    ap.add_argument("--sections", type=int, nargs=2, default=(2, 6), metavar=("MIN", "MAX"))
    a = ap.parse_args(argv)
    n = a.notes if a.notes is not None else blocks_to_notes(a.blocks, tuple(a.sections))
    t0 = time.perf_counter()
    st = generate_vault(
        a.out_dir,
        n,
        seed=a.seed,
        sections_per_note=tuple(a.sections),
        link_density=a.link_density,
        vocab_size=a.vocab_size,
    )
    dt = time.perf_counter() - t0
    print(json.dumps(asdict(st)))
    print(f"{n} notes in {dt:.2f}s ({n / dt if dt else 0:.0f} notes/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
