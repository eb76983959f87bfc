"""Reading a file the kit did not write, boundedly (bench.boundedread's reader, which bench and
./noxw use too: no link followed, no FIFO waited on, only a regular file, no more than a cap),
as UTF-8 text with words for what it is instead. Also the names people give things, held to
what they look like."""
from __future__ import annotations

import unicodedata

from bench.boundedread import Unreadable, read_regular, regular

__all__ = ["Unreadable", "decode_utf8", "hidden_character", "read_regular", "regular",
           "skeleton"]


def decode_utf8(data: bytes) -> str:
    """UTF-8 text, or Unreadable saying which encoding it looks like and where it breaks."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise Unreadable("UTF-16 text: save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise Unreadable("not UTF-8 text (byte 0x%02x at line %d, column %d; Latin-1 or "
                         "another encoding?): save it as UTF-8"
                         % (data[exc.start], line, column))


# Letters of other scripts drawn like Latin ones: "NVIDIA Н200" with a Cyrillic Н reads as
# the plain label and must be judged as one.
CONFUSABLES = str.maketrans({
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x",
    "і": "i", "І": "I", "ј": "j", "Ј": "J", "ѕ": "s", "Ѕ": "S", "ԁ": "d", "ɡ": "g",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "ο": "o", "ν": "v",
})


def skeleton(text: str) -> str:
    """What a name looks like: NFKC (full-width and ligature forms folded) and letters of
    other scripts that are drawn like Latin ones mapped to those."""
    return unicodedata.normalize("NFKC", text).translate(CONFUSABLES)


def hidden_character(text: str) -> str | None:
    """The first character that shows nothing or reorders what follows (zero-width spaces,
    joiners, bidi controls, other format or control characters), named, or None."""
    for char in text:
        if unicodedata.category(char) in ("Cf", "Cc", "Co", "Cs", "Zl", "Zp") and \
                char not in "\t":
            return "U+%04X %s" % (ord(char), unicodedata.name(char, "(unnamed)"))
    return None
