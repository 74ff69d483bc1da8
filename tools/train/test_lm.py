"""Unit tests of tools/train/lm.py on a tiny corpus whose units are letters:
each history's probabilities over the vocabulary and </s> sum to 1 (with and
without pruning), the ARPA file is well formed (every n-gram's prefix and
suffix listed, backoffs on every history), the probabilities equal an
independent dictionary implementation of interpolated modified Kneser-Ney,
seen continuations beat unseen ones, gzip round trip, the word model's
vocabulary and normalisation, and the refusal of a tokenizer whose units.txt
is not the model's."""

import gzip
import math
import os
import random
import tempfile
import unittest
from collections import Counter, defaultdict

from tools.train import lm

VOCAB = list("abcdefg")  # <unk> is added by lm.build


def tiny_corpus():
    """Hand-made sentences plus seeded random ones (enough distinct n-grams
    for real modified-KN discounts at orders 2 and 3)."""
    sentences = [list("abc"), list("abc"), list("abcd"), list("bad"), list("cab"),
                 list("abca"), list("dcba"), list("ee"), list("e")]
    rng = random.Random(7)
    for _ in range(60):
        s, prev = [], rng.choice("abcdefg")
        for _ in range(rng.randint(1, 7)):
            s.append(prev)
            # biased successor: usually the next letter, sometimes any
            prev = "abcdefga"["abcdefg".index(prev) + 1] if rng.random() < 0.6 else rng.choice("abcdefg")
        # "a b" is never followed by "g" (test_seen_beats_unseen)
        if "abg" not in "".join(s):
            sentences.append(s)
    return sentences


def reference_kn(sentences, vocab, order):
    """Interpolated modified Kneser-Ney straight from the definitions with
    dicts: returns prob(history_tuple, word) (linear)."""
    counts = [None] + [Counter() for _ in range(order)]
    for s in sentences:
        seq = [lm.BOS] + list(s) + [lm.EOS]
        for i in range(1, len(seq)):
            for k in range(1, order + 1):
                if i - k + 1 >= 0:
                    counts[k][tuple(seq[i - k + 1:i + 1])] += 1
    adjusted = [None] * (order + 1)
    adjusted[order] = dict(counts[order])
    for k in range(order - 1, 0, -1):
        left = Counter(g[1:] for g in counts[k + 1])
        adjusted[k] = {g: (c if g[0] == lm.BOS else left[g]) for g, c in counts[k].items()}
    discounts = [None]
    for k in range(1, order + 1):
        n = Counter(adjusted[k].values())
        try:
            y = n[1] / (n[1] + 2 * n[2])
            d = (1 - 2 * y * n[2] / n[1], 2 - 3 * y * n[3] / n[2], 3 - 4 * y * n[4] / n[3])
            if not all(0 < d[i] <= i + 1 for i in range(3)):
                d = lm.FALLBACK_DISCOUNTS
        except ZeroDivisionError:
            d = lm.FALLBACK_DISCOUNTS
        discounts.append(d)

    def disc(k, c):
        return 0.0 if c == 0 else discounts[k][min(c, 3) - 1]

    by_hist = [None] + [defaultdict(dict) for _ in range(order)]
    for k in range(1, order + 1):
        for g, c in adjusted[k].items():
            by_hist[k][g[:-1]][g[-1]] = c
    predicted = list(vocab) + [lm.EOS]

    def prob(history, word):
        history = tuple(history)[-(order - 1):] if order > 1 else ()
        k = len(history) + 1
        ext = by_hist[k].get(history)
        if k == 1:
            total = sum(ext.values())
            gamma = sum(disc(1, c) for c in ext.values()) / total
            c = ext.get(word, 0)
            return (c - disc(1, c)) / total + gamma / len(predicted)
        if not ext:
            return prob(history[1:], word)
        total = sum(ext.values())
        gamma = sum(disc(k, c) for c in ext.values()) / total
        c = ext.get(word, 0)
        return (c - disc(k, c)) / total + gamma * prob(history[1:], word)

    return prob, discounts


class LmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.sentences = tiny_corpus()
        cls.full = lm.build(cls.sentences, VOCAB, 3)
        cls.pruned = lm.build(cls.sentences, VOCAB, 3, prune="0,0,1")
        cls.paths = {}
        for name, model in (("full", cls.full), ("pruned", cls.pruned)):
            path = os.path.join(cls.tmp.name, name + ".arpa.gz")
            model.write_arpa(path, precision=6)
            cls.paths[name] = path
        cls.lms = {name: lm.ArpaLm(path) for name, path in cls.paths.items()}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def histories(self):
        return [[], [lm.BOS], [lm.BOS, "a"], ["a", "b"], ["b", "a"], ["a", "b", "c"],
                [lm.BOS, "g"], ["g", "g"], ["f", "a"], [lm.UNK, "c"], ["zz", "a"], ["e"]]

    def test_probabilities_sum_to_one(self):
        for name, model in self.lms.items():
            words = [w for w in model.vocab if w != lm.BOS]
            self.assertEqual(sorted(words), sorted(VOCAB + [lm.UNK, lm.EOS]))
            for h in self.histories():
                total = sum(10 ** model.score(h, w) for w in words)
                self.assertAlmostEqual(total, 1.0, delta=1e-4, msg=f"{name} history {h}")

    def test_arpa_well_formed(self):
        for name, model in self.lms.items():
            self.assertEqual(model.order, 3)
            self.assertEqual(model.ngrams[(lm.BOS,)][0], -99.0)
            prefixes = set()
            for g in model.ngrams:
                self.assertNotIn(lm.BOS, g[1:], f"{name}: <s> inside {g}")
                self.assertNotIn(lm.EOS, g[:-1], f"{name}: </s> inside {g}")
                if len(g) > 1:
                    self.assertIn(g[:-1], model.ngrams, f"{name}: prefix of {g} missing")
                    self.assertIn(g[1:], model.ngrams, f"{name}: suffix of {g} missing")
                    prefixes.add(g[:-1])
            missing = prefixes - model.has_backoff
            self.assertFalse(missing, f"{name}: histories without a backoff weight: {missing}")
        # pruning dropped trigram singletons and only those
        full, pruned = self.lms["full"], self.lms["pruned"]
        tri = Counter()
        for s in self.sentences:
            seq = [lm.BOS] + s + [lm.EOS]
            tri.update(tuple(seq[i:i + 3]) for i in range(len(seq) - 2))
        self.assertEqual({g for g in full.ngrams if len(g) == 3}, set(tri))
        self.assertEqual({g for g in pruned.ngrams if len(g) == 3}, {g for g, c in tri.items() if c > 1})
        self.assertEqual({g for g in full.ngrams if len(g) < 3}, {g for g in pruned.ngrams if len(g) < 3})

    def test_matches_reference_kneser_ney(self):
        prob, discounts = reference_kn(self.sentences, VOCAB + [lm.UNK], 3)
        for k in (1, 2, 3):
            for got, want in zip(self.full.discounts[k], discounts[k]):
                self.assertAlmostEqual(got, want, places=9)
        self.assertNotEqual(tuple(self.full.discounts[3]), lm.FALLBACK_DISCOUNTS)
        model = self.lms["full"]
        words = VOCAB + [lm.UNK, lm.EOS]
        hists = {g[:-1] for g in model.ngrams if len(g) == 3} | {(lm.BOS,), ("g", "a"), ("a", "g")}
        for h in hists:
            for w in words:
                self.assertAlmostEqual(model.score(list(h), w), math.log10(prob(h, w)), delta=2e-6,
                                       msg=f"P({w} | {h})")

    def test_seen_beats_unseen(self):
        for name, model in self.lms.items():
            self.assertGreater(model.score(["a", "b"], "c"), model.score(["a", "b"], "g"), name)
            self.assertGreater(model.score([lm.BOS], "a"), model.score([lm.BOS], lm.UNK), name)
            self.assertLess(model.score([lm.BOS], lm.UNK), -1.5, name)
        # sentence_logprob = the sum of the unit scores, </s> included
        model = self.lms["full"]
        want = (model.score([lm.BOS], "a") + model.score([lm.BOS, "a"], "b")
                + model.score([lm.BOS, "a", "b"], "c") + model.score(["a", "b", "c"], lm.EOS))
        self.assertAlmostEqual(model.sentence_logprob(["a", "b", "c"]), want, places=9)
        self.assertGreater(model.sentence_logprob(list("abc")), model.sentence_logprob(list("cgb")))

    def test_gzip_round_trip(self):
        plain = os.path.join(self.tmp.name, "full.arpa")
        self.full.write_arpa(plain, precision=6)
        with open(self.paths["full"], "rb") as f:
            packed = f.read()
        self.assertEqual(packed[:2], b"\x1f\x8b")
        self.assertEqual(packed[4:8], b"\0\0\0\0", "gzip header must carry no time stamp")
        with open(plain, "rb") as f:
            text = f.read()
        self.assertEqual(gzip.decompress(packed), text)
        self.assertTrue(text.startswith(b"\\data\\\nngram 1=10\n"))
        self.assertTrue(text.endswith(b"\n\\end\\\n"))
        self.assertEqual(lm.ArpaLm(plain).ngrams, self.lms["full"].ngrams)
        again = os.path.join(self.tmp.name, "again.arpa.gz")
        self.full.write_arpa(again, precision=6)
        with open(again, "rb") as f:
            self.assertEqual(f.read(), packed, "the same model must give the same bytes")

    def test_word_model(self):
        lines = ["the cat sat", "the cat ran", "a dog sat", "the dog", "cat"] * 3 + ["a rare word"]
        model = lm.build_words(lines, 2, prune="0,1")
        path = os.path.join(self.tmp.name, "words.arpa.gz")
        model.write_arpa(path, precision=6)
        words = lm.ArpaLm(path)
        vocab = sorted({w for line in lines for w in line.split()})
        self.assertEqual(sorted(w for w in words.vocab if w != lm.BOS),
                         sorted(vocab + [lm.UNK, lm.EOS]))
        # Bigrams seen once ("rare word") are pruned; the words stay.
        self.assertNotIn(("rare", "word"), words.ngrams)
        self.assertIn(("word",), words.ngrams)
        self.assertIn(("the", "cat"), words.ngrams)
        for h in ([lm.BOS], ["the"], ["rare"], ["zz"]):
            total = sum(10 ** words.score(h, w) for w in vocab + [lm.UNK, lm.EOS])
            self.assertAlmostEqual(total, 1.0, delta=1e-4, msg=f"history {h}")
        self.assertGreater(words.score(["the"], "cat"), words.score(["the"], "sat"))

    def test_refuses_another_tokenizer(self):
        model_dir = os.path.join(self.tmp.name, "model")
        tok_dir = os.path.join(self.tmp.name, "tok")
        os.makedirs(model_dir)
        os.makedirs(tok_dir)
        with open(os.path.join(model_dir, "units.txt"), "w", encoding="utf-8") as f:
            f.write("<blank> 0\n<unk> 1\n\u2581a 2\n<sos/eos> 3\n")
        with open(os.path.join(tok_dir, "units.txt"), "w", encoding="utf-8") as f:
            f.write("<blank> 0\n<unk> 1\n\u2581b 2\n<sos/eos> 3\n")
        with self.assertRaises(SystemExit) as cm:
            lm.load_tokenizer(model_dir, tok_dir, "unused", self.tmp.name)
        self.assertIn("differs", str(cm.exception.code))


if __name__ == "__main__":
    unittest.main()
