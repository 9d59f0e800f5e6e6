"""What one reader may see of the index: a `ReadScope` per reader, an `IndexView` per request.

A reader is the vault's owner or one person of a team, and where the text goes (a client,
a local model, a remote model). Everything above storage reads the index through the view
its reader's scope builds, never through `IndexReads` itself: in a view, the notes the
policy hides do not exist — nor their blocks, links, aliases, tags, accesses, vectors or
their share of any count. A new door, retriever or tool that reads a view is private
without remembering to be, and a hidden note answers as a missing one does because, in
the view, it is missing.

How a query is read (which words are kept, which are too common to search) and bm25's own
weights (the number of blocks, their average length, how rare each term is) count only the
blocks in the view: a hidden note moves no score. Memory counts its own the same way, over
the memories the reader may recall (`memory.store.MemoryRepository.view`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NoteNotFound
from .destination import Destination

if TYPE_CHECKING:
    from ..storage.index_reads import IndexReads
    from ..storage.lexical import LexicalQuery
    from .policy import Policy, VaultPolicy

# The hidden notes of a policy that hides nothing: one object, so what is cached by it stays.
NOTHING_HIDDEN: frozenset[int] = frozenset()


class IndexView:
    """`IndexReads` as one reader sees it: the notes in `hidden` (ids), and everything of
    theirs, are not there. With nothing hidden every call goes straight to the index."""

    def __init__(
        self,
        reads: IndexReads,
        hidden: frozenset[int],
        may_read: Callable[[str], bool],
        generation: str | None,
        *,
        restricts: bool = True,
    ) -> None:
        """`restricts`: whether the policy can hide anything at all (when not, every path
        is readable and nothing needs asking)."""
        self._reads = reads
        self.hidden = hidden
        self.restricts = restricts
        self._may_read = may_read
        self.generation = generation  # the index generation the view was built at
        self._hidden_paths: frozenset[str] | None = None

    def readable(self, path: str) -> bool:
        """Whether this reader may see the note (or file) at `path`, indexed or not: what a
        memory's source notes, a file read from disk and a plug-in's candidates are held to."""
        return self._may_read(path)

    def _shows(self, note_id: int) -> bool:
        return note_id not in self.hidden

    def _paths_hidden(self) -> frozenset[str]:
        if self._hidden_paths is None:
            found = self._reads.note_paths(sorted(self.hidden)) if self.hidden else {}
            self._hidden_paths = frozenset(found.values())
        return self._hidden_paths

    # --- the index as a whole

    def meta(self, key: str) -> str | None:
        return self._reads.meta(key)

    def block_count(self) -> int:
        total = self._reads.block_count()
        if not self.hidden:
            return total
        return total - sum(self._reads.note_block_counts(sorted(self.hidden)).values())

    def note_ids(self) -> list[int]:
        return [n for n in self._reads.note_ids() if self._shows(n)]

    def all_note_paths(self) -> list[tuple[int, str]]:
        rows = self._reads.all_note_paths()
        return rows if not self.hidden else [r for r in rows if self._shows(r[0])]

    def language_counts(self, hidden: Collection[int] = ()) -> dict[str, int]:
        return self._reads.language_counts(self.hidden | frozenset(hidden))

    def notes_matching(
        self,
        modified_after_ns: int | None,
        modified_before_ns: int | None,
        tags: Sequence[str],
    ) -> list[tuple[int, str, str]]:
        rows = self._reads.notes_matching(modified_after_ns, modified_before_ns, tags)
        return rows if not self.hidden else [r for r in rows if self._shows(r[0])]

    # --- lexical

    def stems(self, text: str) -> list[str]:
        return self._reads.stems(text)

    def doc_freqs(self, terms: Sequence[str], hidden: Collection[int] = ()) -> dict[str, int]:
        return self._reads.doc_freqs(terms, self.hidden | frozenset(hidden))

    def bm25_blocks(
        self,
        query: LexicalQuery,
        weights: Sequence[float],
        limit: int,
        *,
        allowed: Collection[int] | None = None,
        hidden: Collection[int] = (),
        absent: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        return self._reads.bm25_blocks(
            query, weights, limit, allowed=allowed, hidden=hidden, absent=self.hidden | set(absent)
        )

    # --- blocks and notes by id

    def block_notes(self, block_ids: Collection[int]) -> dict[int, int]:
        found = self._reads.block_notes(block_ids)
        return found if not self.hidden else {b: n for b, n in found.items() if self._shows(n)}

    def block_rows(self, block_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        rows = self._reads.block_rows(block_ids)
        if not self.hidden:
            return rows
        return {b: row for b, row in rows.items() if self._shows(row["note_id"])}

    def note_paths(self, note_ids: Sequence[int]) -> dict[int, str]:
        return self._reads.note_paths([n for n in note_ids if self._shows(n)])

    def note_block_counts(self, note_ids: Sequence[int]) -> dict[int, int]:
        return self._reads.note_block_counts([n for n in note_ids if self._shows(n)])

    def first_blocks(self, note_ids: Sequence[int]) -> dict[int, int]:
        return self._reads.first_blocks([n for n in note_ids if self._shows(n)])

    def note_title_language(self, note_id: int) -> tuple[str, str | None] | None:
        return self._reads.note_title_language(note_id) if self._shows(note_id) else None

    def note_sections(self, note_id: int) -> list[tuple[str, str]]:
        return self._reads.note_sections(note_id) if self._shows(note_id) else []

    def neighbours(self, block_id: int) -> list[tuple[int, int, str, int, int, int]]:
        if self.hidden and not self.block_notes([block_id]):
            return []  # a block of a hidden note; its neighbours are of the same note
        return self._reads.neighbours(block_id)

    # --- the link graph and what the user works on

    def resolved_links(self, sources: Sequence[int] | None = None) -> list[tuple[int, int, str]]:
        rows = self._reads.resolved_links(sources)
        if not self.hidden:
            return rows
        return [r for r in rows if self._shows(r[0]) and self._shows(r[1])]

    def passage_links(self, block_ids: Sequence[int]) -> list[tuple[int, int]]:
        shown = self.block_notes(block_ids) if self.hidden else None
        rows = self._reads.passage_links(block_ids if shown is None else sorted(shown))
        return rows if not self.hidden else [r for r in rows if self._shows(r[1])]

    def recent_accesses(self, limit: int) -> list[tuple[int, float]]:
        rows = self._reads.recent_accesses(limit + len(self.hidden))
        return [r for r in rows if self._shows(r[0])][:limit]

    def count_edited_since(self, mtime_ns: int, at_most: int) -> int:
        if not self.hidden:
            return self._reads.count_edited_since(mtime_ns, at_most)
        return len(self.edited_since(mtime_ns, at_most))

    def edited_since(self, mtime_ns: int, limit: int) -> list[tuple[int, int]]:
        rows = self._reads.edited_since(mtime_ns, limit + len(self.hidden))
        return [r for r in rows if self._shows(r[0])][:limit]

    def record_access(self, note_id: int, at: float, kind: str) -> None:
        if not self._shows(note_id):
            raise NoteNotFound("no such note")
        self._reads.record_access(note_id, at, kind)

    def clear_accesses(self, hidden: Collection[int] = ()) -> int:
        return self._reads.clear_accesses(self.hidden | set(hidden))

    # --- notes by name, and what status and the agent's tools show

    def find_note(
        self, by: str, name: str, any_case: bool, *, hidden: Collection[int] = ()
    ) -> tuple[str, int] | None:
        return self._reads.find_note(by, name, any_case, hidden=self.hidden | frozenset(hidden))

    def has_notes(self) -> bool:
        if not self.hidden:
            return self._reads.has_notes()
        return bool(self.note_ids())

    def index_counts(
        self, model: str | None, language: str | None, *, hidden: Collection[int] = ()
    ) -> dict[str, Any]:
        return self._reads.index_counts(model, language, hidden=self.hidden | frozenset(hidden))

    def link_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, bool]]]:
        notes, links = self._reads.link_rows()
        if not self.hidden:
            return notes, links
        gone = self._paths_hidden()
        return (
            [n for n in notes if n[0] not in gone],
            [link for link in links if link[0] not in gone and link[1] not in gone],
        )

    def notes_under(self, folder: str) -> list[str]:
        paths = self._reads.notes_under(folder)
        return paths if not self.hidden else [p for p in paths if p not in self._paths_hidden()]

    def note_tags(self) -> list[tuple[int, str]]:
        rows = self._reads.note_tags()
        return rows if not self.hidden else [r for r in rows if self._shows(r[0])]

    def tagged(self, tag: str) -> list[tuple[str, str]]:
        rows = self._reads.tagged(tag)
        return rows if not self.hidden else [r for r in rows if r[0] not in self._paths_hidden()]

    # --- vectors

    def vector_count(self, model: str) -> int:
        if not self.hidden:
            return self._reads.vector_count(model)
        return sum(len(rows) for rows in self.vector_keys(model, 10_000))

    def vector_rows(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str, bytes]]]:
        return self._shown_rows(self._reads.vector_rows(model, chunk))

    def vector_keys(self, model: str, chunk: int) -> Iterator[list[tuple[int, int, str]]]:
        return self._shown_rows(self._reads.vector_keys(model, chunk))

    def vectors_of(self, model: str, hashes: Sequence[str]) -> list[tuple[str, bytes]]:
        """By content hash: only hashes a shown block carries reach here (`vector_keys`)."""
        return self._reads.vectors_of(model, hashes)

    def _shown_rows(self, chunks: Iterator[list[Any]]) -> Iterator[list[Any]]:
        if not self.hidden:
            yield from chunks
            return
        for rows in chunks:
            if kept := [r for r in rows if self._shows(r[1])]:
                yield kept

    def close(self) -> None:
        """Nothing: a view owns no connection."""


class ReadScope:
    """One reader of one index: its policy (the vault's, or a team person's) and where
    the text goes (None: anywhere, the widest reader, that what is shared between readers
    is loaded through). `view()` is the index as that reader may see it, built once per
    index generation and policy (a policy remembers each path's answer, so a new
    generation re-reads only paths)."""

    def __init__(
        self,
        reads: IndexReads,
        policy: VaultPolicy,
        destination: Destination | None = Destination.CLIENT,
    ) -> None:
        self._reads = reads
        self.policy = policy
        self.destination = destination
        self._cached: tuple[str | None, Policy, IndexView] | None = None
        self._lock = threading.Lock()

    def view(self) -> IndexView:
        policy = self.policy.current()
        generation = self._reads.meta("generation")
        cached = self._cached
        if cached is not None and cached[0] == generation and cached[1] is policy:
            return cached[2]
        with self._lock:
            cached = self._cached  # another thread may have built it meanwhile
            if cached is not None and cached[0] == generation and cached[1] is policy:
                return cached[2]
            destinations = tuple(Destination) if self.destination is None else (self.destination,)

            def may_read(path: str) -> bool:
                return any(policy.readable(path, d) for d in destinations)

            hidden = NOTHING_HIDDEN
            restricts = all(policy.restricts_reading_for(d) for d in destinations)
            if restricts:
                rows = self._reads.all_note_paths()
                hidden = frozenset(n for n, p in rows if not may_read(p)) or NOTHING_HIDDEN
            view = IndexView(self._reads, hidden, may_read, generation, restricts=restricts)
            self._cached = (generation, policy, view)
            return view
