"""English text normalisation for training transcripts.

The synthesizers are fed the normalised text, so what is spoken is exactly
the transcript: lowercase words of a-z and the apostrophe, separated by
single spaces. Numbers, ordinals, currency amounts, percentages and common
symbols and abbreviations are spelled out; anything else that is not a
letter is dropped (punctuation) or turns the sentence down (see `normalize`).
"""

import re

ALPHABET = "abcdefghijklmnopqrstuvwxyz'"

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
         "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
         "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = [(10 ** 12, "trillion"), (10 ** 9, "billion"), (10 ** 6, "million"),
           (1000, "thousand")]
_ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                  "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}

_ABBREVIATIONS = [
    (r"\bmr\.", "mister"), (r"\bmrs\.", "missus"), (r"\bms\.", "miz"),
    (r"\bdr\.", "doctor"), (r"\bprof\.", "professor"), (r"\bst\.", "saint"),
    (r"\bjr\.", "junior"), (r"\bsr\.", "senior"), (r"\bvs\.?", "versus"),
    (r"\be\.g\.", "for example"), (r"\bi\.e\.", "that is"), (r"\betc\.", "et cetera"),
    (r"\bapprox\.", "approximately"), (r"\bno\.(?=\s*\d)", "number"),
]
_SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "=": " equals ",
            "@": " at ", "#": " number ", "°": " degrees ", "½": " one half ",
            "¼": " one quarter "}
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"),
               "€": ("euro", "euros", "cent", "cents")}


def cardinal(n: int) -> str:
    """0 <= n < 10**15 in words: 342 -> "three hundred forty two"."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + ("" if rest == 0 else " " + cardinal(rest))
    for scale, name in _SCALES:
        if n >= scale:
            high, rest = divmod(n, scale)
            return cardinal(high) + " " + name + ("" if rest == 0 else " " + cardinal(rest))
    raise ValueError(f"number out of range: {n}")


def ordinal(n: int) -> str:
    """21 -> "twenty first"."""
    words = cardinal(n).split()
    last = words[-1]
    if last in _ORDINAL_WORDS:
        words[-1] = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def year(n: int) -> str:
    """A four-digit year as spoken: 1984 -> "nineteen eighty four",
    2005 -> "two thousand five", 1900 -> "nineteen hundred"."""
    if 2000 <= n < 2010:
        return cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return cardinal(high) + " hundred"
    if low < 10:
        return cardinal(high) + " oh " + cardinal(low)
    return cardinal(high) + " " + cardinal(low)


def _digits(s: str) -> str:
    return " ".join(_ONES[int(c)] for c in s)


def _number(token: str) -> str:
    """A plain number token (digits, optional thousands commas, optional
    decimal part) in words."""
    whole, _, frac = token.partition(".")
    whole = whole.replace(",", "")
    n = int(whole) if whole else 0
    if not frac and "," not in token and len(whole) == 4 and 1100 <= n <= 2099:
        words = year(n)
    elif len(whole) > 15:
        words = _digits(whole)
    else:
        words = cardinal(n)
    if frac:
        words += " point " + _digits(frac)
    return words


def _currency(match) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[match.group(1)]
    whole = int(match.group(2).replace(",", ""))
    cents = match.group(3)
    scale = match.group(4)
    if scale:
        amount = _number(match.group(2) + ("." + cents if cents else ""))
        return f" {amount} {scale} {many} "
    out = f"{cardinal(whole)} {one if whole == 1 else many}"
    if cents and int(cents) > 0:
        c = int(cents.ljust(2, "0")[:2])
        out += f" and {cardinal(c)} {sub_one if c == 1 else sub_many}"
    return f" {out} "


_NUM = r"\d{1,3}(?:,\d{3})+|\d+"
_CURRENCY_RE = re.compile(r"([$£€])\s?(" + _NUM + r")(?:\.(\d{1,2}))?(?:\s(million|billion|thousand))?\b")
_ORDINAL_RE = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_PERCENT_RE = re.compile(r"(\d)\s*%")
_NUMBER_RE = re.compile(r"(?:" + _NUM + r")(?:\.\d+)?")
_TIME_RE = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_DECADE_RE = re.compile(r"\b(1[1-9]\d0|20[0-9]0)'?s\b")


def _time(match) -> str:
    h, m = int(match.group(1)), int(match.group(2))
    if m == 0:
        return f" {cardinal(h)} o'clock "
    return f" {cardinal(h)} {'oh ' + cardinal(m) if m < 10 else cardinal(m)} "


def _decade(match) -> str:
    words = year(int(match.group(1))).split()
    last = words[-1]
    words[-1] = (last[:-1] + "ies") if last.endswith("y") else last + "s"
    return " " + " ".join(words) + " "


def normalize(text: str, max_dropped: float = 0.1):
    """Normalised text, or None when the sentence is not plain English prose.

    None is returned when more than `max_dropped` of its non-space characters
    are neither letters, digits nor ordinary punctuation (code, tables, ASCII
    art), because such lines are not something a speaker would read aloud.
    """
    t = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'")
    t = t.replace("\u201c", '"').replace("\u201d", '"').replace("\u2013", "-").replace("\u2014", " ")
    visible = [c for c in t if not c.isspace()]
    if not visible:
        return None
    odd = sum(1 for c in visible
              if not (c.isalnum() or c in ".,;:!?'\"()-$£€%&+=@#°/½¼"))
    if odd > max_dropped * len(visible) or not all(c.isascii() or c in "$£€°½¼" for c in t):
        return None
    t = t.lower()
    for pattern, words in _ABBREVIATIONS:
        t = re.sub(pattern, " " + words + " ", t)
    t = _CURRENCY_RE.sub(_currency, t)
    t = _TIME_RE.sub(_time, t)
    t = _DECADE_RE.sub(_decade, t)
    t = _PERCENT_RE.sub(r"\1 percent ", t)
    t = _ORDINAL_RE.sub(lambda m: " " + ordinal(int(m.group(1))) + " ", t)
    t = _NUMBER_RE.sub(lambda m: " " + _number(m.group(0)) + " ", t)
    for sym, words in _SYMBOLS.items():
        t = t.replace(sym, words)
    # Hyphens and slashes join words that are spoken separately.
    t = re.sub(r"[-/_]", " ", t)
    t = "".join(c if c in ALPHABET else " " for c in t)
    # Quotes are kept only inside words (don't, o'clock).
    t = re.sub(r"(?<![a-z])'|'(?![a-z])", " ", t)
    words = t.split()
    return " ".join(words) if words else None
