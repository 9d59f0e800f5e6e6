"""Real PDF files written byte by byte: pages of text in a standard font, an outline, and
the hostile kinds (encrypted, damaged, a decompression bomb) a vault may hold."""

from __future__ import annotations

import zlib
from collections.abc import Sequence


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(
    pages: Sequence[str],
    *,
    outline: Sequence[tuple[str, int]] = (),
    encrypt: bool = False,
    bomb_bytes: int = 0,
) -> bytes:
    """A PDF of `pages` (each page's lines of text, split at newlines), with `outline`
    entries (title, 0-based page); `encrypt` adds a password the reader does not know;
    `bomb_bytes` makes the first page's content a Flate stream that inflates to that much."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below
    pages_id = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    for number, text in enumerate(pages):
        ops = ["BT", "/F1 11 Tf", "14 TL", "50 780 Td"]
        for line in text.split("\n"):
            ops.append(f"({_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1", "replace")
        if bomb_bytes and number == 0:
            packer = zlib.compressobj(9)
            zeros = b" " * (1 << 20)
            parts = [packer.compress(stream + b"\n")]
            parts += [packer.compress(zeros) for _ in range(bomb_bytes >> 20)]
            stream = b"".join(parts) + packer.flush()
            content = add(
                b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream)
                + stream
                + b"\nendstream"
            )
        else:
            content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_ids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842] /Contents %d 0 R"
                b" /Resources << /Font << /F1 %d 0 R >> >> >>" % (pages_id, content, font)
            )
        )
    kids = b" ".join(b"%d 0 R" % i for i in page_ids)
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids))
    outline_ref = b""
    if outline:
        root = add(b"")
        items = [add(b"") for _ in outline]
        for position, ((title, page), item) in enumerate(zip(outline, items, strict=True)):
            links = b""
            if position > 0:
                links += b" /Prev %d 0 R" % items[position - 1]
            if position < len(items) - 1:
                links += b" /Next %d 0 R" % items[position + 1]
            objects[item - 1] = b"<< /Title (%s) /Parent %d 0 R /Dest [%d 0 R /Fit]%s >>" % (
                _escape(title).encode("latin-1"),
                root,
                page_ids[page],
                links,
            )
        objects[root - 1] = b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>" % (
            items[0],
            items[-1],
            len(items),
        )
        outline_ref = b" /Outlines %d 0 R" % root
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R%s >>" % (pages_id, outline_ref)
    encrypt_ref = b""
    if encrypt:
        key = add(
            b"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -44"
            b" /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> >>"
        )
        encrypt_ref = b" /Encrypt %d 0 R /ID [<%s> <%s>]" % (key, b"ab" * 16, b"ab" * 16)
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        catalog,
        encrypt_ref,
        xref,
    )
    return bytes(out)
