"""Write `src/vaultctx/storage/wordpiece_tables.py`: the character classes `tokenizers`' BERT
normalizer and pre-tokenizer use (its Rust `unicode_categories` tables, older than Python's
`unicodedata`), read by asking the library about every code point.

Run with `tokenizers` installed: `python scripts/wordpiece_tables.py`.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import normalizers, pre_tokenizers

OUT = Path(__file__).resolve().parents[1] / "src/vaultctx/storage/wordpiece_tables.py"


def ranges(codes: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for code in codes:
        if out and out[-1][1] == code - 1:
            out[-1] = (out[-1][0], code)
        else:
            out.append((code, code))
    return out


def main() -> None:
    clean = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False
    )
    strip = normalizers.BertNormalizer(
        clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False
    )
    split = pre_tokenizers.BertPreTokenizer()
    control, marks, punct = [], [], []
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            control.append(code)  # Cs: a str cannot carry one to the library
            continue
        char = chr(code)
        if char not in "\x00\ufffd" and clean.normalize_str(f"a{char}") == "a":
            control.append(code)
        if strip.normalize_str(char) == "":
            marks.append(code)
        if code > 127 and len(split.pre_tokenize_str(f"a{char}b")) == 3:
            punct.append(code)
    lines = [
        '"""Character classes of `tokenizers`\' BERT normalizer and pre-tokenizer, as inclusive',
        "code point ranges. Written by scripts/wordpiece_tables.py; do not edit.",
        '"""',
        "",
    ]
    for name, codes in (("CONTROL", control), ("MARK", marks), ("PUNCTUATION", punct)):
        lines.append(f"{name} = (")
        lines += [f"    ({low:#x}, {high:#x})," for low, high in ranges(codes)]
        lines.append(")")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
