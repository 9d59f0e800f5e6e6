"""A BERT WordPiece tokenizer read from a `tokenizer.json`, giving the ids the `tokenizers`
library gives, so the default install runs the bundled model without that library and the
Hugging Face hub client it requires.

It covers one shape exactly: special tokens matched in the raw text, `BertNormalizer`,
`BertPreTokenizer`, a `WordPiece` model and a `[CLS] A [SEP]` template. `from_file` answers
None for any other shape; the caller then runs `tokenizers` itself.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import wordpiece_tables

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from pathlib import Path

# Rust's `char::is_whitespace`: the Unicode White_Space property (not Python's `isspace`,
# which also holds U+001C..U+001F).
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# the crate's `is_chinese_char`: CJK Unified Ideographs and their extensions, compatibility
CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
CACHE_LIMIT = 200_000  # words kept in the word → ids cache


def _member(table: tuple[tuple[int, int], ...]) -> Callable[[str], bool]:
    lows = [low for low, _ in table]

    def contains(char: str) -> bool:
        at = bisect.bisect_right(lows, ord(char)) - 1
        return at >= 0 and ord(char) <= table[at][1]

    return contains


# Not `unicodedata`: the crate's tables are of an older Unicode, and Python's change with it.
is_control = _member(wordpiece_tables.CONTROL)  # Cc, Cf, Co, Cs but tab and newlines
is_mark = _member(wordpiece_tables.MARK)  # Mn, dropped by strip_accents after NFD
_is_unicode_punctuation = _member(wordpiece_tables.PUNCTUATION)


def is_punctuation(char: str) -> bool:
    """`BertPreTokenizer`'s punctuation: ASCII punctuation (33–47, 58–64, 91–96, 123–126) or
    a Unicode P* category."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return code > 127 and _is_unicode_punctuation(char)


def is_chinese(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in CJK)


class _Table(dict[int, str]):
    """A `str.translate` table filled on first sight of each character."""

    def __init__(self, rule: Callable[[str], str]) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, code: int) -> str:
        value = self[code] = self.rule(chr(code))
        return value


class WordPieceTokenizer:
    """Text → ids as `tokenizers` encodes one sequence: specials, normalization, words,
    WordPiece, `[CLS] … [SEP]`, truncated to `max_length` ids (0: no truncation)."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        unk_token: str,
        prefix: str,
        max_input_chars_per_word: int,
        specials: dict[str, int],
        cls_id: int,
        sep_id: int,
        clean_text: bool,
        handle_chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
        max_length: int = 0,
    ) -> None:
        self.vocab = vocab
        self.unk_id = vocab[unk_token]
        self.prefix = prefix
        self.max_chars = max_input_chars_per_word
        self.specials = specials
        self._special = (
            re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
            if specials
            else None
        )
        self.cls_id, self.sep_id = cls_id, sep_id
        self.strip_accents = strip_accents
        self.max_length = max_length
        self._cache: dict[str, list[int]] = {}

        def first(char: str) -> str:  # clean_text, then handle_chinese_chars
            if clean_text:
                if char in "\x00\ufffd" or is_control(char):
                    return ""
                if char in WHITESPACE:
                    return " "
            if handle_chinese_chars and is_chinese(char):
                return f" {char} "
            return char

        self._first = _Table(first)
        self._marks = _Table(lambda c: "" if is_mark(c) else c)
        # per character: the crate lowercases each char alone (no final sigma)
        self._lower = _Table(lambda c: c.lower()) if lowercase else None
        self._split = _Table(
            lambda c: " " if c in WHITESPACE else f" {c} " if is_punctuation(c) else c
        )

    @classmethod
    def from_file(cls, path: Path, max_length: int = 0) -> WordPieceTokenizer | None:
        """The tokenizer of `path`, or None when its shape is not one this class reproduces."""
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
            return cls._from_spec(spec, max_length)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @classmethod
    def _from_spec(cls, spec: dict[str, Any], max_length: int) -> WordPieceTokenizer | None:
        model, norm = spec["model"], spec.get("normalizer")
        pre, post = spec.get("pre_tokenizer"), spec.get("post_processor")
        if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
            return None
        if not norm or norm.get("type") != "BertNormalizer":
            return None
        if not pre or pre.get("type") != "BertPreTokenizer":
            return None
        vocab: dict[str, int] = {str(k): int(v) for k, v in model["vocab"].items()}
        specials: dict[str, int] = {}
        for added in spec.get("added_tokens") or []:
            plain = not any(added.get(k) for k in ("single_word", "lstrip", "rstrip", "normalized"))
            if not plain or not added.get("special"):
                return None
            specials[added["content"]] = int(added["id"])
        cls_sep = _cls_sep(post)
        if cls_sep is None or model["unk_token"] not in vocab:
            return None
        lowercase = bool(norm.get("lowercase", True))
        strip = norm.get("strip_accents")
        return cls(
            vocab,
            unk_token=model["unk_token"],
            prefix=str(model.get("continuing_subword_prefix", "##")),
            max_input_chars_per_word=int(model.get("max_input_chars_per_word", 100)),
            specials=specials,
            cls_id=cls_sep[0],
            sep_id=cls_sep[1],
            clean_text=bool(norm.get("clean_text", True)),
            handle_chinese_chars=bool(norm.get("handle_chinese_chars", True)),
            strip_accents=lowercase if strip is None else bool(strip),
            lowercase=lowercase,
            max_length=max_length,
        )

    def token_to_id(self, token: str) -> int | None:
        return self.specials.get(token, self.vocab.get(token))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        if self._special is None:
            self._encode_plain(text, ids)
        else:
            start = 0
            for match in self._special.finditer(text):
                self._encode_plain(text[start : match.start()], ids)
                ids.append(self.specials[match.group()])
                start = match.end()
            self._encode_plain(text[start:], ids)
        if self.max_length and len(ids) > self.max_length - 2:
            del ids[max(0, self.max_length - 2) :]
        return [self.cls_id, *ids, self.sep_id]

    def _encode_plain(self, text: str, ids: list[int]) -> None:
        text = text.translate(self._first)
        if self.strip_accents and not text.isascii():
            text = unicodedata.normalize("NFD", text).translate(self._marks)
        if self._lower is not None:
            text = text.translate(self._lower)
        cache = self._cache
        for word in text.translate(self._split).split(" "):
            if not word:
                continue
            pieces = cache.get(word)
            if pieces is None:
                pieces = self._word(word)
                if len(cache) < CACHE_LIMIT:
                    cache[word] = pieces
            ids.extend(pieces)

    def _word(self, word: str) -> list[int]:
        """Greedy longest-match-first; a word with any unmatched rest is the unknown token."""
        if len(word) > self.max_chars:
            return [self.unk_id]
        vocab, pieces, start = self.vocab, [], 0
        while start < len(word):
            end = len(word)
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return [self.unk_id]
            start = end
        return pieces


def _cls_sep(post: dict[str, Any] | None) -> tuple[int, int] | None:
    """The ids of a `[CLS] A [SEP]` single-sequence template."""
    if not post or post.get("type") != "TemplateProcessing":
        return None
    single = post["single"]
    if len(single) != 3 or "Sequence" not in single[1] or single[1]["Sequence"]["id"] != "A":
        return None
    ends = []
    for item in (single[0], single[2]):
        token = item.get("SpecialToken")
        ids = post["special_tokens"].get(token["id"], {}).get("ids") if token else None
        if not ids or len(ids) != 1:
            return None
        ends.append(int(ids[0]))
    return ends[0], ends[1]
