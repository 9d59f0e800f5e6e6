"""The postings on PostgreSQL: each term's blocks as FTS5 counts them, in segments.

A segment holds the postings of up to SEGMENT_NOTES notes, one row per term
(`posting_lists`): its postings packed as big-endian records (`RECORD`: block, note, the
block's token count, the term's count in each column), and their positions (column *
POSITION_STRIDE + offset, each posting's in order). A publish writes whole segments; a note
written again or deleted leaves a tombstone in its old segment (`dead_notes`) until that
segment is rebuilt from the notes it still holds (`segment_notes`). One row per term and
segment, not per term and block: a 10,000-note vault is 125,000 rows, not 5.4 million, so a
publish is a few COPYs of bytes and a read a few rows per term.

The terms are FTS5's own: a row's UTF-8 is cut into pieces at ASCII characters that are not
letters or digits (FTS5's tokenizer separates at every one of them, so cutting there changes
no token, and a multi-byte character holds no ASCII byte), and each piece FTS5 has not seen
in this publish is tokenized by FTS5 itself once, in a temporary table; the counting is
numpy's.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..lexical import FTS_TOKENIZER

# Positions are stored as column * POSITION_STRIDE + offset (a block's column holds far
# fewer tokens than this).
POSITION_STRIDE = 1_000_000
# A place is a block and a position in one int64: block << PLACE_BITS | position
# (2^22 > 3 * POSITION_STRIDE).
PLACE_BITS = 22
# A segment's notes at most: rows per term grow with segments, the bytes a rebuild
# re-reads with their size.
SEGMENT_NOTES = 2000
RECORD = np.dtype([("block", ">i8"), ("note", ">i8"), ("ntok", ">i4"), ("tf", ">i4", (3,))])
POSITION = np.dtype(">i4")
# Every ASCII character but letters and digits, as a space: what splits text into pieces.
_SEPARATORS = bytes.maketrans(
    bytes(c for c in range(128) if not chr(c).isalnum()), b" " * (128 - 62)
)
MAX_TERM_BYTES = 1000  # longer terms are keyed by a hash (`stored_term`)
# Every tombstone (segment, note) as one sorted bytea of big-endian int64 keys, segment <<
# NOTE_BITS | note: one row, read in the statement that reads the posting lists.
NOTE_BITS = 40
DEAD_KEYS = f"""
SELECT coalesce(string_agg(int8send(segment::bigint << {NOTE_BITS} | note_id), ''::bytea
                           ORDER BY segment, note_id), ''::bytea)
FROM dead_notes"""
_PIECES_KEPT = 2_000_000  # pieces an analyser remembers before it starts again
# Joins a row's cells: its 0xFF, never in UTF-8, is a piece of its own between them.
_CELL_MARK = b"\xff"
_CELL_JOIN = b" " + _CELL_MARK + b" "
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"


def stored_term(term: str) -> str:
    """A term as the database keys it: itself, or past MAX_TERM_BYTES (a pasted key or
    blob with no separator in it) its first characters, an ellipsis and a hash, which no
    term of FTS5's holds. A btree key cannot pass a third of a page: one such token would
    fail a publish."""
    data = term.encode()
    if len(data) <= MAX_TERM_BYTES:
        return term
    return f"{term[:64]}\u2026{hashlib.sha256(data).hexdigest()[:32]}"


@dataclass
class SegmentRows:
    """The postings of a set of blocks, by term: term i's are records[bounds[i]:bounds[i+1]],
    their positions in the same order; `ntok`, each block's token count."""

    terms: list[str]
    bounds: np.ndarray
    records: np.ndarray
    positions: np.ndarray
    ntok: dict[int, int]

    @property
    def count(self) -> int:
        return len(self.records)

    def holding(self, notes: Collection[int] | None = None) -> Counter[str]:
        """Each term's number of blocks (of `notes` only, when given)."""
        if notes is None:
            counts = np.diff(self.bounds)
        else:
            kept = np.isin(self.records["note"], np.fromiter(notes, np.int64, len(notes)))
            counts = np.add.reduceat(kept.astype(np.int64), self.bounds[:-1]) if len(kept) else kept
        return Counter({t: int(n) for t, n in zip(self.terms, counts.tolist(), strict=True) if n})

    def copy_data(self, segment: int) -> bytearray:
        """These rows as `COPY posting_lists (term, segment, postings, positions) FROM STDIN
        (FORMAT BINARY)` reads them."""
        records = self.records.tobytes()
        positions = self.positions.tobytes()
        ends = np.concatenate(([0], np.cumsum(self.records["tf"].sum(axis=1), dtype=np.int64)))
        at = (self.bounds * RECORD.itemsize).tolist()
        position_at = (ends[self.bounds] * POSITION.itemsize).tolist()
        fields = struct.pack(">ii", 4, segment)
        out = bytearray(_COPY_SIGNATURE)
        for i, term in enumerate(self.terms):
            name = term.encode()
            a, b, p, q = at[i], at[i + 1], position_at[i], position_at[i + 1]
            out += struct.pack(">hi", 4, len(name))
            out += name
            out += fields
            out += struct.pack(">i", b - a)
            out += records[a:b]
            out += struct.pack(">i", q - p)
            out += positions[p:q]
        out += _COPY_TRAILER
        return out


class _Numbering(dict[bytes, int]):
    """Numbers keys at first sight (in one pass over a list, at C speed for those seen),
    and lists the new ones."""

    def __init__(self) -> None:
        super().__init__()
        self.new: list[bytes] = []

    def __missing__(self, key: bytes) -> int:
        number = self[key] = len(self)
        self.new.append(key)
        return number


class Analyser:
    """Counts the terms of full-text rows (block id, title, heading path, text; analysed as
    the indexer analyses them) as FTS5 counts them, with the index's tokenizer run on each
    new piece of text once, in a temporary table of `lite`."""

    def __init__(self, lite: sqlite3.Connection) -> None:
        self.lite = lite
        lite.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_pieces"
            f" USING fts5(x, tokenize='{FTS_TOKENIZER}')"
        )
        lite.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_pieces_v"
            " USING fts5vocab(temp, vx_pieces, instance)"
        )
        self._forget()

    def _forget(self) -> None:
        self._piece_ids = _Numbering()
        self._piece_ids[_CELL_MARK] = 0  # a piece of no term: where a cell ends
        self._term_ids: dict[str, int] = {}
        self._terms: list[str] = []
        self._starts = [0, 0]  # piece i's terms are _flat[_starts[i]:_starts[i + 1]]
        self._flat: list[int] = []

    def _piece_numbers(self, pieces: list[bytes]) -> np.ndarray:
        """Each piece's number, the pieces not seen yet tokenized first."""
        if len(self._piece_ids) > _PIECES_KEPT:
            self._forget()
        numbers = np.fromiter(map(self._piece_ids.__getitem__, pieces), np.int64, len(pieces))
        if self._piece_ids.new:
            self._learn(self._piece_ids.new)
            self._piece_ids.new = []
        return numbers

    def _learn(self, new: list[bytes]) -> None:
        found: dict[int, list[tuple[int, str]]] = {}
        # One transaction: FTS5 writes a segment of its own index at each commit.
        self.lite.execute("SAVEPOINT vx_pieces")
        try:
            self.lite.execute("DELETE FROM temp.vx_pieces")
            self.lite.executemany(
                "INSERT INTO temp.vx_pieces(rowid, x) VALUES (?, ?)",
                ((i, piece.decode()) for i, piece in enumerate(new)),
            )
            for term, doc, offset in self.lite.execute(
                "SELECT term, doc, offset FROM temp.vx_pieces_v"
            ):
                found.setdefault(doc, []).append((offset, term))
            self.lite.execute("DELETE FROM temp.vx_pieces")
        finally:
            self.lite.execute("RELEASE vx_pieces")
        for i in range(len(new)):  # numbered in this order by _Numbering
            for _, term in sorted(found.get(i, ())):
                term_id = self._term_ids.get(term)
                if term_id is None:
                    term_id = self._term_ids[term] = len(self._terms)
                    self._terms.append(term)
                self._flat.append(term_id)
            self._starts.append(len(self._flat))

    def analyse(
        self,
        rows: Sequence[tuple[int, str | None, str | None, str | None]],
        note_of: Mapping[int, int],
    ) -> SegmentRows:
        """The postings of these rows (`note_of`: each block's note)."""
        # Every cell's pieces, a mark between two cells: three cells a row.
        text = _CELL_JOIN.join(value.encode() if value else b"" for r in rows for value in r[1:])
        piece = self._piece_numbers(text.translate(_SEPARATORS).split())
        cells = 3 * len(rows)
        blocks = np.array([row[0] for row in rows], dtype=np.int64)
        notes = np.array([note_of[row[0]] for row in rows], dtype=np.int64)
        starts = np.asarray(self._starts, dtype=np.int64)
        flat = np.asarray(self._flat, dtype=np.int64)
        # Each piece's terms, in order: the tokens of every cell.
        per_piece = (starts[1:] - starts[:-1])[piece]
        tokens = int(per_piece.sum())
        token_at = np.arange(tokens, dtype=np.int64)
        first = np.repeat(starts[piece] - (np.cumsum(per_piece) - per_piece), per_piece)
        term = flat[first + token_at]
        cell = np.repeat(np.cumsum(piece == 0), per_piece)
        in_cell = np.bincount(cell, minlength=cells)
        offset = token_at - (np.cumsum(in_cell) - in_cell)[cell]
        ntok = in_cell.reshape(-1, 3).sum(axis=1)
        # By term, then block, column and offset (the order tokens come in).
        order = _stable_order(term)
        term, cell, offset = term[order], cell[order], offset[order]
        block, column = cell // 3, cell % 3
        starts_posting = np.ones(tokens, dtype=bool)
        starts_posting[1:] = (term[1:] != term[:-1]) | (block[1:] != block[:-1])
        posting = np.cumsum(starts_posting) - 1
        count = int(posting[-1]) + 1 if tokens else 0
        records = np.zeros(count, dtype=RECORD)
        if count:
            records["tf"] = np.bincount(posting * 3 + column, minlength=count * 3).reshape(-1, 3)
            first_token = np.flatnonzero(starts_posting)
            held = block[first_token]
            records["block"] = blocks[held]
            records["note"] = notes[held]
            records["ntok"] = ntok[held]
            posting_terms = term[first_token]
            new_term = np.ones(count, dtype=bool)
            new_term[1:] = posting_terms[1:] != posting_terms[:-1]
            bounds = np.append(np.flatnonzero(new_term), count)
            names = [stored_term(self._terms[t]) for t in posting_terms[new_term].tolist()]
        else:
            bounds, names = np.zeros(1, dtype=np.int64), []
        return SegmentRows(
            terms=names,
            bounds=bounds,
            records=records,
            positions=(column * POSITION_STRIDE + offset).astype(POSITION),
            ntok=dict(zip(blocks.tolist(), ntok.tolist(), strict=True)),
        )


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """The order that sorts `keys` (below 2^32) keeping equal keys as they were: two passes
    of numpy's radix sort, 16 bits each (a quarter of argsort's time)."""
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    high = np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")
    return low[high]


@dataclass
class Postings:
    """Live postings as read back: one entry per (term, block)."""

    block: np.ndarray
    note: np.ndarray
    ntok: np.ndarray
    tf: np.ndarray  # (n, 3): the count in each column
    # When asked for: every position of every posting, as block << PLACE_BITS | position.
    places: np.ndarray | None = None

    def weighted(self, weights: Sequence[float]) -> np.ndarray:
        """Each posting's count, its columns weighted."""
        tf = self.tf.astype(np.float64)
        return weights[0] * tf[:, 0] + weights[1] * tf[:, 1] + weights[2] * tf[:, 2]


def dead_key(segment: int, note: int) -> int:
    """A tombstone as one int64, as `DEAD_KEYS` packs them."""
    return (segment << NOTE_BITS) | note


def read_postings(
    rows: Sequence[tuple[str, int, bytes, bytes | None]], dead: bytes = b""
) -> dict[str, Postings]:
    """Each term's postings from its rows (term, segment, postings, positions or None),
    without the tombstones' (`dead`: as `DEAD_KEYS` reads them)."""
    by_term: dict[str, list[tuple[int, bytes, bytes | None]]] = {}
    for term, segment, data, positions in rows:
        by_term.setdefault(term, []).append((segment, bytes(data), positions))
    dead_keys = np.frombuffer(dead, dtype=">i8").astype(np.int64)
    found: dict[str, Postings] = {}
    for term, parts in by_term.items():
        records = np.frombuffer(b"".join(part[1] for part in parts), dtype=RECORD)
        keep = np.ones(len(records), dtype=bool)
        if len(dead_keys):
            segments = np.repeat(
                np.array([part[0] for part in parts], dtype=np.int64),
                [len(part[1]) // RECORD.itemsize for part in parts],
            )
            keys = (segments << NOTE_BITS) | records["note"].astype(np.int64)
            at = np.minimum(np.searchsorted(dead_keys, keys), len(dead_keys) - 1)
            keep = dead_keys[at] != keys
        kept = records[keep]
        places = None
        if parts[0][2] is not None:
            at_places = np.frombuffer(b"".join(bytes(part[2] or b"") for part in parts), POSITION)
            counts = records["tf"].sum(axis=1).astype(np.int64)
            blocks = np.repeat(records["block"].astype(np.int64), counts)
            places = ((blocks << PLACE_BITS) | at_places.astype(np.int64))[np.repeat(keep, counts)]
        found[term] = Postings(
            block=kept["block"].astype(np.int64),
            note=kept["note"].astype(np.int64),
            ntok=kept["ntok"].astype(np.int64),
            tf=kept["tf"].astype(np.int64),
            places=places,
        )
    return found
