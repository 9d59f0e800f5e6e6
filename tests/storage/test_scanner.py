"""Which files of a vault are notes: hidden folders, ignore rules, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vaultctx.storage.scanner import excluded, load_ignore_spec, scan_paths, scan_vault


def note_paths(root: Path) -> list[str]:
    return [f.path for f in scan_vault(root).files]


def test_finds_markdown_notes_in_every_folder_as_sorted_posix_paths(make_vault):
    root = make_vault(
        {
            "Home.md": "# Home",
            "Journal/2025/03/Inspection.md": "x",
            "Journal/Season Log.md": "x",
            "image.png": b"\x89PNG",
            "data.csv": "a,b",
            "notes.txt": "not markdown",
        }
    )
    assert note_paths(root) == [
        "Home.md",
        "Journal/2025/03/Inspection.md",
        "Journal/Season Log.md",
    ]


def test_records_size_and_mtime_of_each_note(make_vault):
    root = make_vault({"A.md": "12345"})
    (note,) = scan_vault(root).files
    stat = (root / "A.md").stat()
    assert (note.size, note.mtime_ns) == (5, stat.st_mtime_ns)
    assert note.abspath == root.resolve() / "A.md"


@pytest.mark.parametrize("folder", [".obsidian", ".trash", ".git", ".vaultctx", ".hidden"])
def test_hidden_and_tool_folders_are_ignored(make_vault, folder):
    root = make_vault({"Note.md": "x", f"{folder}/Inside.md": "x", f"{folder}/sub/Deep.md": "x"})
    assert note_paths(root) == ["Note.md"]


def test_hidden_files_are_ignored(make_vault):
    root = make_vault({"Note.md": "x", ".scratch.md": "x", "Folder/.draft.md": "x"})
    assert note_paths(root) == ["Note.md"]


def test_vaultctxignore_uses_gitignore_syntax(make_vault):
    root = make_vault(
        {
            ".vaultctxignore": (
                "# private things\n"
                "Private/\n"
                "*.draft.md\n"
                "!Keep.draft.md\n"
                "/Top only.md\n"
                "Journal/**/scratch.md\n"
            ),
            "Private/Bank details.md": "x",
            "Private/Deep/More.md": "x",
            "Ideas/Plan.draft.md": "x",
            "Ideas/Keep.draft.md": "x",
            "Ideas/Plan.md": "x",
            "Top only.md": "x",
            "Sub/Top only.md": "x",
            "Journal/2025/scratch.md": "x",
            "Journal/2025/Real.md": "x",
        }
    )
    assert note_paths(root) == [
        "Ideas/Keep.draft.md",
        "Ideas/Plan.md",
        "Journal/2025/Real.md",
        "Sub/Top only.md",
    ]


def test_a_folder_pattern_without_slash_matches_folders_anywhere(make_vault):
    root = make_vault({".vaultctxignore": "templates\n", "A/templates/T.md": "x", "A/B.md": "x"})
    assert note_paths(root) == ["A/B.md"]


def test_the_example_vault_ignore_file_keeps_private_notes_out(example_vault):
    paths = note_paths(example_vault)
    assert not [p for p in paths if p.startswith(("Private/", ".obsidian/", ".vaultctx/"))]
    assert "Home.md" in paths
    assert len(paths) == 54  # 52 notes and 2 skills (Skills/)


def test_symlinks_that_leave_the_vault_are_not_followed(tmp_path, make_vault):
    outside = tmp_path / "outside"
    (outside / "Secrets").mkdir(parents=True)
    (outside / "Secrets" / "Leak.md").write_text("x")
    (outside / "Single.md").write_text("x")
    root = make_vault({"Inside.md": "x"})
    (root / "Linked folder").symlink_to(outside / "Secrets", target_is_directory=True)
    (root / "Linked note.md").symlink_to(outside / "Single.md")
    (root / "Absolute root").symlink_to("/", target_is_directory=True)
    assert note_paths(root) == ["Inside.md"]


def test_a_note_symlinked_inside_the_vault_is_found_once_under_its_real_path(make_vault):
    root = make_vault({"Real.md": "x"})
    (root / "Shortcut.md").symlink_to(root / "Real.md")
    assert note_paths(root) == ["Real.md"]


@pytest.mark.parametrize(
    ("target", "link"),
    [
        ("private/s.md", "pub.md"),  # the target's folder is in .vaultctxignore
        (".obsidian/secret.md", "exposed.md"),  # the target is hidden
        ("private", "privdir"),  # a link to an ignored folder
        (".obsidian", "config"),  # a link to a hidden folder
    ],
)
def test_a_symlink_to_a_hidden_or_ignored_place_is_skipped_like_its_target(
    make_vault, target, link
):
    root = make_vault(
        {
            ".vaultctxignore": "private/\n",
            "Note.md": "x",
            "private/s.md": "secret",
            ".obsidian/secret.md": "secret",
        }
    )
    (root / link).symlink_to(root / target, target_is_directory=(root / target).is_dir())
    assert note_paths(root) == ["Note.md"]


def test_symlink_loops_terminate(make_vault):
    root = make_vault({"A/Note.md": "x", "A/B/Deeper.md": "x"})
    (root / "A" / "B" / "up").symlink_to(root / "A", target_is_directory=True)
    (root / "A" / "self").symlink_to(".", target_is_directory=True)
    (root / "A" / "B" / "root").symlink_to(root, target_is_directory=True)
    assert note_paths(root) == ["A/B/Deeper.md", "A/Note.md"]


@pytest.mark.parametrize("link_name", ["0 first", "zz last"])
def test_a_folder_reached_by_a_symlink_inside_the_vault_is_indexed_once(make_vault, link_name):
    root = make_vault({"Hives/Clover.md": "x", "Hives/Records/Queens.md": "x"})
    (root / link_name).symlink_to(root / "Hives", target_is_directory=True)
    (root / f"{link_name} records").symlink_to(root / "Hives" / "Records")
    assert note_paths(root) == ["Hives/Clover.md", "Hives/Records/Queens.md"]


def test_dangling_symlinks_are_ignored(make_vault):
    root = make_vault({"Note.md": "x"})
    (root / "Gone.md").symlink_to(root / "missing.md")
    (root / "Gone folder").symlink_to(root / "missing", target_is_directory=True)
    assert note_paths(root) == ["Note.md"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can list any folder")
def test_an_unlistable_folder_is_reported_as_a_problem(make_vault):
    root = make_vault({"Note.md": "x", "Locked/Inside.md": "x"})
    (root / "Locked").chmod(0)
    try:
        result = scan_vault(root)
    finally:
        (root / "Locked").chmod(0o755)
    assert [f.path for f in result.files] == ["Note.md"]
    assert [p for p, _ in result.problems] == ["Locked"]


NAMES = st.sampled_from(["a", "b", "Private", ".hidden", "x.draft", "Notes"])
PATTERNS = st.sampled_from(
    ["Private/", "*.draft.md", "!b.md", "/a/", "Notes/**/b.md", "x.draft", "a/*.md", "!a/"]
)


@given(
    paths=st.lists(
        st.lists(NAMES, min_size=1, max_size=3).map(lambda parts: "/".join(parts) + ".md"),
        min_size=1,
        max_size=8,
        unique=True,
    ),
    patterns=st.lists(PATTERNS, max_size=4),
)
def test_excluded_says_exactly_which_notes_the_scan_skips(tmp_path_factory, paths, patterns):
    """The read policy asks `excluded` at query time: it must agree with the walk."""
    root = tmp_path_factory.mktemp("vault")
    (root / ".vaultctxignore").write_text("\n".join(patterns) + "\n")
    for rel in paths:
        if any((root / p).is_file() for p in _prefixes(rel)):
            continue  # a file where this path needs a folder
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if not (root / rel).is_dir():
            (root / rel).write_text("x")
    spec = load_ignore_spec(root)
    on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if p.is_file())
    found = set(note_paths(root))
    assert {p for p in on_disk if not excluded(spec, p)} == found


def _prefixes(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


# Trees for the single-path scan: notes, other files, and symlinks (to a folder or a note,
# inside the vault or out of it) under plain, hidden and ignorable names.
PARTS = st.sampled_from(["a", "b", "Private", ".hidden", "x.draft", "Notes", "link"])
ENTRIES = st.tuples(
    st.lists(PARTS, min_size=1, max_size=3).map("/".join),
    st.sampled_from(["note", "text", "link-in-folder", "link-in-note", "link-out", "folder"]),
)


def _build_tree(root: Path, outside: Path, entries: list[tuple[str, str]]) -> list[str]:
    """Make `entries` under `root`; returns every path made (and some below them)."""
    made = []
    for rel, kind in entries:
        path = root / (rel + (".md" if kind in ("note", "link-in-note") else ""))
        if any(p.is_symlink() or p.is_file() for p in [path, *path.parents]):
            continue  # taken, or a file where a folder is needed
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            continue
        if path.exists():
            continue
        if kind == "note":
            path.write_text("x")
        elif kind == "text":
            path.with_suffix(".txt").write_text("x")
        elif kind == "folder":
            path.mkdir()
            (path / "In.md").write_text("x")
        elif kind == "link-in-folder":
            (root / "Target").mkdir(exist_ok=True)
            (root / "Target" / "T.md").write_text("x")
            path.symlink_to(root / "Target", target_is_directory=True)
        elif kind == "link-in-note":
            (root / "Real.md").write_text("x")
            path.symlink_to(root / "Real.md")
        else:
            path.symlink_to(outside, target_is_directory=True)
        made.append(path.relative_to(root).as_posix())
    return made


@given(entries=st.lists(ENTRIES, min_size=1, max_size=8), patterns=st.lists(PATTERNS, max_size=3))
def test_a_named_path_is_a_note_exactly_when_the_full_scan_finds_it(
    tmp_path_factory, entries, patterns
):
    """The watcher's route (only the saved path is looked at) decides as the walk does:
    ignore rules, hidden folders, symlinks in and out of the vault, folders and other files."""
    root = tmp_path_factory.mktemp("vault")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "Away.md").write_text("x")
    (root / ".vaultctxignore").write_text("\n".join(patterns) + "\n")
    made = _build_tree(root, outside, entries)
    candidates = {"Real.md", "Target/T.md", "missing/None.md", "../outside/Away.md"}
    for rel in made:
        candidates |= {rel, f"{rel}/In.md", f"{rel}/T.md", f"{rel}/Away.md", f"{rel}.md"}
    full = {f.path: f for f in scan_vault(root).files}
    for rel in sorted(candidates):
        expected = [full[rel]] if rel in full else []
        assert scan_paths(root, [rel]).files == expected, rel
    together = scan_paths(root, sorted(candidates)).files
    assert together == [full[p] for p in sorted(full) if p in candidates]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can list any folder")
def test_a_named_path_in_an_unlistable_folder_is_reported_as_the_walk_does(make_vault):
    root = make_vault({"Note.md": "x", "Locked/Inside.md": "x"})
    (root / "Locked").chmod(0o100)  # entered, not listed
    try:
        result = scan_paths(root, ["Locked/Inside.md"])
    finally:
        (root / "Locked").chmod(0o755)
    assert result.files == []
    assert [p for p, _ in result.problems] == ["Locked"]
