"""Builds the English text corpus from text Debian packages install.

Sources (Debian 12 packages):
  * wordnet-base: dictionary glosses and their quoted example sentences
    (/usr/share/wordnet/data.{noun,verb,adj,adv});
  * fortunes: proverbs, quotations and jokes (/usr/share/games/fortunes).

Every sentence is normalised (text_norm.normalize), kept when it has
--min-words .. --max-words words, deduplicated, and assigned to train or
held-out by a hash of its normalised text, so the two sets never share a
sentence and the split does not depend on the order sources are read in.

    /usr/bin/python3 -m tools.train.corpus --out tools/train/corpus
writes train.txt.gz and heldout.txt.gz (one sentence a line) and stats.json.
"""

import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import sys

from tools.train.text_norm import normalize

WORDNET_DIR = "/usr/share/wordnet"
FORTUNE_DIR = "/usr/share/games/fortunes"
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')]*\s+(?=[\"'(]?[A-Z0-9])")


def split_sentences(text: str):
    """Sentences of a paragraph of prose (whitespace collapsed)."""
    text = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(text) if s]


def wordnet_texts(wordnet_dir: str = WORDNET_DIR):
    """Glosses (definitions) and example sentences of every synset."""
    for pos in ("noun", "verb", "adj", "adv"):
        path = os.path.join(wordnet_dir, "data." + pos)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:
                    continue  # licence header
                gloss = line.split(" | ", 1)[1].strip()
                for part in gloss.split(";"):
                    part = part.strip()
                    if not part:
                        continue
                    if part.startswith('"'):
                        yield part.strip('"')
                    else:
                        yield part


def fortune_texts(fortune_dir: str = FORTUNE_DIR):
    """Sentences of every English fortune cookie, without attributions."""
    for path in sorted(glob.glob(os.path.join(fortune_dir, "*"))):
        if os.path.splitext(path)[1] in (".dat", ".u8") or os.path.isdir(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            entries = f.read().split("\n%\n")
        for entry in entries:
            lines = [l for l in entry.split("\n")
                     if not l.strip().startswith("--") and not l.startswith("\t\t")]
            # Dialogue and verse ("A: ...", indented lines) are still prose
            # sentences once joined; tables and art are filtered by normalize.
            yield from split_sentences(" ".join(lines))


def is_heldout(sentence: str, fraction: float) -> bool:
    h = int(hashlib.sha1(sentence.encode("utf-8")).hexdigest()[:8], 16)
    return h < fraction * 0x100000000


def build(sources, min_words: int, max_words: int, heldout_fraction: float):
    """(train, heldout, stats) from an iterable of (source name, texts)."""
    seen = set()
    train, heldout = [], []
    stats = {}
    for name, texts in sources:
        kept = total = 0
        for text in texts:
            total += 1
            s = normalize(text)
            if s is None:
                continue
            n = len(s.split())
            if n < min_words or n > max_words or s in seen:
                continue
            seen.add(s)
            kept += 1
            (heldout if is_heldout(s, heldout_fraction) else train).append(s)
        stats[name] = {"read": total, "kept": kept}
    stats["train_sentences"] = len(train)
    stats["heldout_sentences"] = len(heldout)
    stats["train_words"] = sum(len(s.split()) for s in train)
    return train, heldout, stats


def write_lines(path: str, lines):
    # mtime=0 keeps the gzip bytes reproducible.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))


def read_lines(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [l.strip() for l in f if l.strip()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--min-words", type=int, default=3)
    p.add_argument("--max-words", type=int, default=25)
    p.add_argument("--heldout-fraction", type=float, default=0.02)
    p.add_argument("--wordnet-dir", default=WORDNET_DIR)
    p.add_argument("--fortune-dir", default=FORTUNE_DIR)
    a = p.parse_args(argv)
    sources = [("wordnet", wordnet_texts(a.wordnet_dir)), ("fortunes", fortune_texts(a.fortune_dir))]
    train, heldout, stats = build(sources, a.min_words, a.max_words, a.heldout_fraction)
    if not train or not heldout:
        sys.exit("corpus: no sentences found; are wordnet-base and fortunes installed?")
    os.makedirs(a.out, exist_ok=True)
    write_lines(os.path.join(a.out, "train.txt.gz"), train)
    write_lines(os.path.join(a.out, "heldout.txt.gz"), heldout)
    with open(os.path.join(a.out, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
