"""The human development set: real people's English speech from Debian
packages, with the text each recording says, as an evaluation folder that
tools/train/eval_cpp.py reads (eval.jsonl and 16-bit WAVs). It chooses
training recipes; it is never trained on.

    /usr/bin/python3 -m tools.train.human_dev --out WORK/human_dev [--debs DIR]

--debs holds the packages' .debs (fetched there with `apt-get download`
when missing; a Debian 12 machine with apt). The Ogg Vorbis recordings are
decoded with oggdec (Debian's vorbis-tools). Then:

    /usr/bin/python3 -m tools.train.eval_cpp --model models/en-conformer-ctc \\
        --eval WORK/human_dev --heldout-voices tuxpaint,ktuberling,klettres,kajongg \
        --out /tmp/human_dev.json
    /usr/bin/python3 -m tools.train.eval_pocketsphinx --eval WORK/human_dev \
        --out /tmp/human_dev_pocketsphinx.json      (the reference row)

Where the text comes from, per source ("voice" in eval.jsonl):
- tuxpaint: Tux Paint's stamps (tuxpaint-stamps-default). A stamp's
  NAME_desc.ogg is a person reading its English description, the first
  line of NAME.txt ("A badger."); the digits *_en_GB.ogg are the numbers.
- ktuberling: KTuberling's English sound theme (ktuberling-data): each
  object's name said aloud, the text from the theme's sound name.
- klettres: KLettres' English and British syllable sounds (klettres-data):
  the files that are English words (car, dog, ...); letters and bare
  sounds ("aw", "th") are left out.
- kajongg: Kajongg's four English voices (kajongg: two men, two women)
  calling mahjong tiles and claims. The text follows from the file name:
  b/c/s + digit is "bamboo", "character", "circle" + the number ("circle
  five"), dg / dr "green dragon" / "red dragon", we / wn / ws / ww the
  winds' names ("east"), pung, kong, chow, and the phrases ("no choice",
  "dangerous game", "original call", "violates original call"). Left out:
  db (the third dragon: the voices do not agree on its name) and
  mahjongg (its spelling is not settled). The German voices are not taken.
Not taken: Hedgewars' English voice packs (hedgewars-data). Their files are
named after a line, not transcribed, and the acting strays from the name
(British Byebye.ogg is heard as "farewell ..."): pocketsphinx-en-us got
none of 134 lines right, so a miss there says nothing about a model.

Held out for independent checks and never used here: asterisk-core-sounds-*,
pocketsphinx-testdata and the alsa-utils recordings.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

PACKAGES = ("tuxpaint-stamps-default", "ktuberling-data", "klettres-data", "kajongg")

_DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
# KTuberling's sound names whose spoken word is not the name's last part as
# written (the names are identifiers: run together, misspelt).
_KTUBERLING_WORDS = {"fallingstar": "falling star", "palmtree": "palm tree",
                     "sphynx": "sphinx", "broccolli": "broccoli"}
# KLettres' syllable files that are English words.
_KLETTRES_WORDS = {"arm", "ball", "car", "dog", "ear", "fix", "gas", "gem", "hot", "hut", "jet",
                   "key", "me", "my", "no", "or", "pet", "saw", "say", "sit", "sky", "the",
                   "well"}
# Kajongg's English voice files that are not tiles: the words said.
_KAJONGG_WORDS = {"dg": "green dragon", "dr": "red dragon", "we": "east", "wn": "north",
                  "ws": "south", "ww": "west", "pung": "pung", "kong": "kong", "chow": "chow",
                  "nochoice": "no choice", "dangerousgame": "dangerous game",
                  "originalcall": "original call",
                  "violatesoriginalcall": "violates original call"}
_KAJONGG_SUITS = {"b": "bamboo", "c": "character", "s": "circle"}


def tuxpaint_items(root: str):
    """(voice, id, text, ogg) of Tux Paint's English stamp descriptions."""
    stamps = os.path.join(root, "usr/share/tuxpaint/stamps")
    items = []
    for ogg in sorted(glob.glob(os.path.join(stamps, "**/*_desc.ogg"), recursive=True)):
        txt = ogg[: -len("_desc.ogg")] + ".txt"
        if not os.path.exists(txt):
            continue
        with open(txt, encoding="utf-8") as f:
            text = f.readline().strip()
        if text:
            items.append(("tuxpaint", os.path.relpath(ogg, stamps)[:-4], text, ogg))
    for ogg in sorted(glob.glob(os.path.join(stamps, "**/[0-9]_en_GB.ogg"), recursive=True)):
        digit = int(os.path.basename(ogg)[0])
        items.append(("tuxpaint", os.path.relpath(ogg, stamps)[:-4], _DIGITS[digit], ogg))
    return items


def ktuberling_items(root: str):
    """(voice, id, text, ogg) of KTuberling's English object names."""
    theme = os.path.join(root, "usr/share/ktuberling/sounds/en.soundtheme")
    items = []
    if not os.path.exists(theme):
        return items
    with open(theme, encoding="utf-8") as f:
        sounds = re.findall(r'<sound name="([^"]+)" file="([^"]+)"', f.read())
    for name, rel in sounds:
        ogg = os.path.join(os.path.dirname(theme), rel)
        word = name.split("_")[-1]  # "egypt_camel": the camel of the Egypt board.
        if os.path.exists(ogg):
            items.append(("ktuberling", name, _KTUBERLING_WORDS.get(word, word), ogg))
    return items


def klettres_items(root: str):
    """(voice, id, text, ogg) of KLettres' English and British words."""
    items = []
    for lang in ("en", "en_GB"):
        for ogg in sorted(glob.glob(os.path.join(root, "usr/share/klettres", lang, "syllab/*.ogg"))):
            word = os.path.basename(ogg)[:-4].lower()
            if word in _KLETTRES_WORDS:
                items.append(("klettres", f"{lang}/{word}", word, ogg))
    return items


def kajongg_items(root: str):
    """(voice, id, text, ogg) of Kajongg's English tile names and claims."""
    items = []
    voices = os.path.join(root, "usr/share/kajongg/voices")
    for speaker in ("male1", "male2", "female1", "female2"):
        for ogg in sorted(glob.glob(os.path.join(voices, speaker, "*.ogg"))):
            name = os.path.basename(ogg)[:-4]
            if re.fullmatch(r"[bcs][1-9]", name):
                text = f"{_KAJONGG_SUITS[name[0]]} {_DIGITS[int(name[1])]}"
            else:
                text = _KAJONGG_WORDS.get(name)
            if text:
                items.append(("kajongg", f"{speaker}/{name}", text, ogg))
    return items


COLLECTORS = {"tuxpaint-stamps-default": tuxpaint_items, "ktuberling-data": ktuberling_items,
              "klettres-data": klettres_items, "kajongg": kajongg_items}


def find_deb(debs: str, package: str):
    found = sorted(glob.glob(os.path.join(debs, package + "_*.deb")))
    return found[-1] if found else None


def fetch(debs: str, packages) -> None:
    """Downloads the packages missing from `debs` (apt-get download)."""
    missing = [p for p in packages if find_deb(debs, p) is None]
    if missing:
        os.makedirs(debs, exist_ok=True)
        subprocess.run(["apt-get", "download"] + missing, cwd=debs, check=True)


def safe_name(item_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", item_id)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="the evaluation folder to write")
    p.add_argument("--debs", default=os.path.join(tempfile.gettempdir(), "oasr-human-dev-debs"),
                   help="folder of the packages' .debs (downloaded there when missing)")
    p.add_argument("--oggdec", default="oggdec")
    a = p.parse_args(argv)
    fetch(a.debs, PACKAGES)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for package in PACKAGES:
            root = os.path.join(tmp, package)
            subprocess.run(["dpkg-deb", "-x", find_deb(a.debs, package), root], check=True)
            items = COLLECTORS[package](root)
            if not items:
                sys.exit(f"human_dev: {package} has none of the recordings expected")
            for voice, item_id, text, ogg in items:
                wav = os.path.join(voice, safe_name(item_id) + ".wav")
                os.makedirs(os.path.join(a.out, voice), exist_ok=True)
                subprocess.run([a.oggdec, "-Q", "-b", "16", "-o", os.path.join(a.out, wav), ogg],
                               check=True)
                rows.append({"id": f"{voice}/{item_id}", "voice": voice, "text": text, "wav": wav})
            print(f"human_dev: {package}: {len(items)} recordings", flush=True)
    with open(os.path.join(a.out, "eval.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"human_dev: {len(rows)} recordings in {a.out}/eval.jsonl")


if __name__ == "__main__":
    main()
