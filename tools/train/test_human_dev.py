"""tools/train/human_dev.py: which recordings of each package's layout are
taken, and the text each is given (trees laid out as the .debs unpack; the
audio is not read here)."""

import os
import tempfile
import unittest

from tools.train import human_dev


def touch(root: str, rel: str, text: str = "") -> None:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def texts(items):
    return {(voice, item_id): text for voice, item_id, text, _ in items}


class HumanDevTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_tuxpaint_descriptions_take_their_texts_first_line_and_digits_their_words(self):
        stamps = "usr/share/tuxpaint/stamps/"
        touch(self.root, stamps + "animals/badger.txt", "A badger.\nfr.utf8=Un blaireau.\n")
        touch(self.root, stamps + "animals/badger_desc.ogg")
        touch(self.root, stamps + "animals/badger_desc_fr.ogg")  # Another language.
        touch(self.root, stamps + "animals/badger.ogg")  # The animal's own sound.
        touch(self.root, stamps + "animals/wallaby_desc.ogg")  # No text: left out.
        touch(self.root, stamps + "symbols/math/7_en_GB.ogg")
        touch(self.root, stamps + "symbols/math/7_de.ogg")
        touch(self.root, stamps + "symbols/letters/F_filled_en_GB.ogg")  # A letter: left out.
        self.assertEqual(texts(human_dev.tuxpaint_items(self.root)), {
            ("tuxpaint", "animals/badger_desc"): "A badger.",
            ("tuxpaint", "symbols/math/7_en_GB"): "seven",
        })

    def test_ktuberling_names_lose_their_board_and_get_their_spelling(self):
        sounds = "usr/share/ktuberling/sounds/"
        touch(self.root, sounds + "en.soundtheme",
              '<language code="en">\n <sound name="ball" file="en/ball.ogg" />\n'
              ' <sound name="moon_fallingstar" file="en/moon_fallingstar.ogg" />\n'
              ' <sound name="egypt_camel" file="en/egypt_camel.ogg" />\n'
              ' <sound name="tv_tree" file="en/tv_tree.ogg" />\n</language>\n')
        for name in ("ball", "moon_fallingstar", "egypt_camel"):  # tv_tree.ogg is missing.
            touch(self.root, sounds + f"en/{name}.ogg")
        touch(self.root, sounds + "de/ball.ogg")
        self.assertEqual(texts(human_dev.ktuberling_items(self.root)), {
            ("ktuberling", "ball"): "ball",
            ("ktuberling", "moon_fallingstar"): "falling star",
            ("ktuberling", "egypt_camel"): "camel",
        })

    def test_klettres_keeps_the_english_words_only(self):
        for rel in ("en/syllab/car.ogg", "en/syllab/th.ogg", "en/alpha/A.ogg",
                    "en_GB/syllab/well.ogg", "de/syllab/car.ogg"):
            touch(self.root, "usr/share/klettres/" + rel)
        self.assertEqual(texts(human_dev.klettres_items(self.root)), {
            ("klettres", "en/car"): "car", ("klettres", "en_GB/well"): "well"})

    def test_kajongg_tiles_and_claims_of_the_english_voices(self):
        voices = "usr/share/kajongg/voices/"
        for rel in ("male1/b3.ogg", "female2/s9.ogg", "male2/c1.ogg", "female1/dg.ogg",
                    "male1/ww.ogg", "male2/violatesoriginalcall.ogg", "male1/pung.ogg",
                    "male1/db.ogg", "male1/mahjongg.ogg",  # Left out: names not settled.
                    "de/male1/b3.ogg", "male1/COPYRIGHT"):  # German; not a recording.
            touch(self.root, voices + rel)
        self.assertEqual(texts(human_dev.kajongg_items(self.root)), {
            ("kajongg", "male1/b3"): "bamboo three",
            ("kajongg", "female2/s9"): "circle nine",
            ("kajongg", "male2/c1"): "character one",
            ("kajongg", "female1/dg"): "green dragon",
            ("kajongg", "male1/ww"): "west",
            ("kajongg", "male2/violatesoriginalcall"): "violates original call",
            ("kajongg", "male1/pung"): "pung",
        })

    def test_every_package_has_a_collector_and_ids_make_file_names(self):
        self.assertEqual(set(human_dev.PACKAGES), set(human_dev.COLLECTORS))
        self.assertEqual(human_dev.safe_name("en_GB/it's x"), "en_GB_it_s_x")


if __name__ == "__main__":
    unittest.main()
