"""Unit tests of the training pipeline's pure parts (run by ctest, CPU):
normaliser, corpus split, batched augmentation, the batched front end
(WaveStore, BatchFbank against the reference fbank, CMVN), stores appended
to, masks, checkpoint parts, one training step of the reference model
through train_forward, and tiny train.py runs that pick up a shard written
between epochs (--reload-shards) and resume over more data."""

import contextlib
import ctypes
import glob
import gzip
import io
import json
import math
import os
import random
import shutil
import tempfile
import unittest
from unittest import mock

import torch
import torchaudio

from tools.reference import frontend, model_dir
from tools.reference.model import ConformerCtcModel, ModelConfig, randomize_
from tools.train import (augment, checkpoint, codecs, corpus, gpu_frontend, hts, synth,
                         tokenizer, train)
from tools.train.text_norm import ALPHABET, cardinal, normalize, ordinal, year
from tools.train.train_forward import (PositionCache, attention_mask, dynamic_chunk, encode,
                                       freq_warp, greedy_decode, output_lengths)


class NormalizeTest(unittest.TestCase):
    def test_cardinals(self):
        self.assertEqual(cardinal(0), "zero")
        self.assertEqual(cardinal(15), "fifteen")
        self.assertEqual(cardinal(40), "forty")
        self.assertEqual(cardinal(342), "three hundred forty two")
        self.assertEqual(cardinal(1000001), "one million one")
        self.assertEqual(cardinal(2500), "two thousand five hundred")

    def test_ordinals_and_years(self):
        self.assertEqual(ordinal(1), "first")
        self.assertEqual(ordinal(22), "twenty second")
        self.assertEqual(ordinal(40), "fortieth")
        self.assertEqual(ordinal(112), "one hundred twelfth")
        self.assertEqual(year(1984), "nineteen eighty four")
        self.assertEqual(year(1900), "nineteen hundred")
        self.assertEqual(year(1905), "nineteen oh five")
        self.assertEqual(year(2007), "two thousand seven")

    def test_sentences(self):
        cases = {
            "It cost $5.50 in 1984.": "it cost five dollars and fifty cents in nineteen eighty four",
            "He came 2nd of 10,000 runners!": "he came second of ten thousand runners",
            "Sales rose 15% & profits fell.": "sales rose fifteen percent and profits fell",
            "Dr. Smith met Mr. Jones at 3:30.": "doctor smith met mister jones at three thirty",
            "pi is about 3.14": "pi is about three point one four",
            "Don't stop -- it's the 1960s' sound": "don't stop it's the nineteen sixties sound",
            "\u201cQuoted\u201d words, a well-known phrase": "quoted words a well known phrase",
            "The 21st century": "the twenty first century",
            "A \u00a3100 note": "a one hundred pounds note",
        }
        for text, want in cases.items():
            self.assertEqual(normalize(text), want, text)

    def test_output_alphabet(self):
        for text in ["Hello, World #1 = +2 @ home!", "x/y_z 'quoted' 7th"]:
            out = normalize(text)
            self.assertTrue(set(out) <= set(ALPHABET + " "), out)
            self.assertNotIn("  ", out)

    def test_rejects_non_prose(self):
        self.assertIsNone(normalize("|__|__|  +--+--+  {}[]<>"))
        self.assertIsNone(normalize("   "))
        self.assertIsNone(normalize("caf\u00e9 na\u00efve"))  # not coverable by a-z


class CorpusTest(unittest.TestCase):
    def test_split_dedup_and_filter(self):
        texts = ["The cat sat on the mat.", "the cat sat on the mat", "Too short.",
                 "One two three four five.", " ".join(["word"] * 30)]
        texts += [f"Sentence number {i} is here." for i in range(300)]
        train, held, stats = corpus.build([("t", texts)], 3, 25, 0.2)
        self.assertEqual(len(set(train) & set(held)), 0)
        self.assertEqual(len(train) + len(held), len(set(train + held)))
        self.assertIn("the cat sat on the mat", train + held)
        self.assertNotIn("too short", train + held)
        self.assertTrue(all(3 <= len(s.split()) <= 25 for s in train + held))
        self.assertGreater(len(held), 20)  # ~20 % of ~300
        self.assertEqual(stats["t"]["read"], len(texts))

    def test_split_sentences(self):
        self.assertEqual(corpus.split_sentences("One here. Two there!  \"Three?\" four"),
                         ["One here.", "Two there!", "\"Three?\" four"])


def padded(waves):
    """(B, N) zero-padded batch and (B,) lengths of 1-D tensors."""
    lengths = torch.tensor([w.numel() for w in waves])
    x = torch.zeros(len(waves), int(lengths.max()), dtype=waves[0].dtype)
    for i, w in enumerate(waves):
        x[i, :w.numel()] = w
    return x, lengths


def test_waves(seconds=(0.9, 0.61, 0.37)):
    return [frontend.synthetic_speech(s, k) for k, s in enumerate(seconds)]


class AugmentTest(unittest.TestCase):
    def test_microphone_response(self):
        n = 4 * 16000
        x = torch.randn(3, n, generator=torch.Generator().manual_seed(5)) * 0.1
        lengths = torch.tensor([n, n, n - 16000])
        x = augment.zero_padding(x, lengths)
        p = augment.draw(3, torch.Generator().manual_seed(2))
        p["mic_hp_hz"][0], p["mic_lp_hz"][0], p["mic_tilt_db"][0] = 1e-3, 8000.0, 0.0
        p["mic_peak_db"][0] = 0.0  # row 0: a flat response
        p["mic_hp_hz"][1], p["mic_lp_hz"][1], p["mic_tilt_db"][1] = 200.0, 4000.0, 2.0
        p["mic_peak_hz"][1] = torch.tensor([1000.0, 2500.0, 6000.0], dtype=torch.float64)
        p["mic_peak_db"][1] = torch.tensor([6.0, -6.0, 0.0], dtype=torch.float64)
        rows = torch.arange(3)
        y = augment.microphone(x, lengths, p, rows)
        self.assertLess(float((y[0] - x[0]).abs().max()), 1e-4)  # flat: the identity
        self.assertEqual(float(y[2, n - 16000:].abs().sum()), 0.0)  # padding stays zero
        for i in range(3):  # the level is kept
            self.assertAlmostEqual(float(y[i].pow(2).sum() / x[i].pow(2).sum()), 1.0, places=4)
        # Row 1: the measured gain (output over input power in a third-octave
        # band, relative to 1 kHz) follows the response's, within 1.5 dB.
        want = augment.mic_response_db(torch.tensor([125.0, 500.0, 1000.0, 2500.0, 6000.0]), p,
                                       torch.tensor([1]))[0]
        measured = [band_energy_db(y[1], f / 2 ** (1 / 6), f * 2 ** (1 / 6))
                    - band_energy_db(x[1], f / 2 ** (1 / 6), f * 2 ** (1 / 6))
                    for f in (125.0, 500.0, 1000.0, 2500.0, 6000.0)]
        for k, f in enumerate((125.0, 500.0, 1000.0, 2500.0, 6000.0)):
            self.assertAlmostEqual(measured[k] - measured[2], float(want[k] - want[2]),
                                   delta=1.5, msg=f"{f} Hz")
        self.assertLess(float(want[0] - want[2]), -8.0)  # the high pass
        self.assertLess(float(want[4] - want[2]), -10.0)  # the low pass at 4 kHz

    def test_stage_probabilities_can_be_set(self):
        saved = augment.set_probabilities("")
        try:
            now = augment.set_probabilities("vtlp=0, noise=0.9")
            self.assertEqual((now["vtlp"], now["noise"]), (0.0, 0.9))
            self.assertEqual(now["reverb"], saved["reverb"])  # the others as they were
            p = augment.draw(20000, torch.Generator().manual_seed(0))
            self.assertFalse(bool(p["vtlp"].any()))
            self.assertAlmostEqual(float(p["noise"].double().mean()), 0.9, delta=0.015)
            for bad in ("pitch=0.1", "noise=1.5", "noise=x", "noise"):
                with self.assertRaises(ValueError, msg=bad):
                    augment.set_probabilities(bad)
        finally:
            augment.set_probabilities(",".join(f"{k}={v}" for k, v in saved.items()))
        self.assertEqual(augment.set_probabilities(""), saved)

    def test_draw_follows_the_constants(self):
        p = augment.draw(20000, torch.Generator().manual_seed(0))
        for factor, prob in augment.SPEED_CHOICES:
            self.assertAlmostEqual(float((p["speed"] == factor).double().mean()), prob, delta=0.015)
        for factor in augment.TEMPO_FACTORS:
            self.assertAlmostEqual(float((p["tempo"] == factor).double().mean()),
                                   augment.TEMPO_PROB / len(augment.TEMPO_FACTORS), delta=0.015)
        for key, prob in (("reverb", augment.REVERB_PROB), ("telephone", augment.TELEPHONE_PROB),
                          ("noise", augment.NOISE_PROB), ("vtlp", augment.VTLP_PROB),
                          ("mic", augment.MIC_PROB)):
            self.assertAlmostEqual(float(p[key].double().mean()), prob, delta=0.015)
        self.assertEqual(sorted(p["codec"].unique().tolist()), list(range(len(augment.CODECS))))
        for key, (lo, hi) in (("rt60", augment.RT60_RANGE), ("drr_db", augment.DRR_DB_RANGE),
                              ("vtlp_alpha", augment.VTLP_RANGE),
                              ("snr_db", augment.SNR_DB_RANGE),
                              ("peak_dbfs", augment.PEAK_DBFS_RANGE)):
            self.assertGreaterEqual(float(p[key].min()), lo)
            self.assertLessEqual(float(p[key].max()), hi)
        self.assertEqual(sorted(p["noise_kind"].unique().tolist()), [0, 1, 2])

    def test_tempo_keeps_pitch_and_level_and_moves_time(self):
        """A tone then another: the same frequencies and level come out, the
        change between them at its time / factor, the length n / factor;
        factor 1 gives the input back."""
        t = torch.arange(16000) / 16000.0
        x = torch.cat([0.5 * torch.sin(2 * math.pi * 300.0 * t[:8000]),
                       0.5 * torch.sin(2 * math.pi * 1200.0 * t[8000:])]).unsqueeze(0)
        same, m = augment.change_tempo(x, torch.tensor([16000]), 1.0)
        self.assertEqual(int(m[0]), 16000)
        self.assertLess(float((same - x).abs().max()), 1e-3)
        for factor in augment.TEMPO_FACTORS:
            y, m = augment.change_tempo(x, torch.tensor([16000]), factor)
            self.assertEqual(int(m[0]), augment.tempo_length(16000, factor))
            self.assertEqual(y.size(1), int(m[0]))
            y = y[0]
            for lo, hi, f in ((400, int(7000 / factor), 300.0),
                              (int(9000 / factor), int(m[0]) - 400, 1200.0)):
                seg = y[lo:hi] * torch.hann_window(hi - lo)
                peak_hz = float(torch.fft.rfft(seg, 1 << 16).abs().argmax()) * 16000 / (1 << 16)
                self.assertAlmostEqual(peak_hz, f, delta=f * 0.01, msg=(factor, f))
                power = torch.stack([y[k:k + 400].pow(2).mean() for k in range(lo, hi - 400, 200)])
                self.assertTrue(bool(((power - 0.125).abs() < 0.02).all()), (factor, f))
            hi_band = torchaudio.functional.highpass_biquad(y.unsqueeze(0), 16000, 800.0)[0]
            hi_power = torch.stack([hi_band[k:k + 400].pow(2).mean()
                                    for k in range(0, int(m[0]) - 400, 200)])
            onset = int((hi_power > 0.5 * hi_power.max()).nonzero()[0]) * 200
            self.assertAlmostEqual(onset, 8000 / factor, delta=400)

    def test_tempo_in_the_batch(self):
        waves = test_waves((0.5, 0.8, 0.3))
        x, n = padded(waves)
        p = augment.draw(3, torch.Generator().manual_seed(0))
        p["speed"] = torch.tensor([1.1, 1.0, 0.9], dtype=torch.float64)
        p["tempo"] = torch.tensor([1.15, 0.87, 1.0], dtype=torch.float64)
        y, m = augment.augment_batch(x, n, p, torch.Generator().manual_seed(1))
        want = [augment.tempo_length(augment.resampled_length(int(k), *augment.speed_rates(float(s))),
                                     float(t)) for k, s, t in zip(n, p["speed"], p["tempo"])]
        self.assertEqual(m.tolist(), want)
        for i in range(3):
            self.assertEqual(float(y[i, m[i]:].abs().sum()), 0.0)
        # Never shorter than gpu_frontend's bound for the CTC length check.
        self.assertTrue(bool((m >= gpu_frontend.shortest_samples(n, True)).all()))
        # A row stretched alone is the row stretched in the batch.
        alone, _ = augment.change_tempo(x[1:2, :int(n[1])], n[1:2], 0.87)
        batch, k = augment.change_tempo(x, n, 0.87)
        self.assertLess(float((alone[0] - batch[1, :alone.size(1)]).abs().max()), 1e-6)
        self.assertEqual(float(batch[1, alone.size(1):].abs().sum()), 0.0)

    def test_speed_changes_length(self):
        x, n = padded(test_waves())
        for factor, (rate, new) in ((0.9, (9, 10)), (1.1, (11, 10))):
            y, m = augment.change_speed(x, n, factor)
            self.assertEqual(m.tolist(), [-(-int(k) * new // rate) for k in n])
            self.assertEqual(y.size(1), int(m.max()))
            for i, w in enumerate(test_waves()):
                ref = torchaudio.functional.resample(w, rate, new)
                self.assertEqual(ref.numel(), int(m[i]))
                self.assertLess(float((y[i, :m[i]] - ref).abs().max()), 1e-5)
                self.assertEqual(float(y[i, m[i]:].abs().sum()), 0.0)

    def test_stages_ignore_padding(self):
        """Each stage gives an utterance in a padded batch what it gives the
        utterance alone, and leaves the padding zero."""
        waves = test_waves()
        x, n = padded(waves)
        gen = torch.Generator().manual_seed(1)
        rirs = augment.room_responses(torch.tensor([0.3, 0.15, 0.5]),
                                      torch.tensor([3.0, 9.0, 14.0]), gen, "cpu")
        peaks = torch.tensor([-3.0, -12.0, -19.0])
        alphas = torch.tensor([0.9, 1.05, 1.12])
        codecs = torch.tensor([1, 2, 0])
        stages = {"reverberate": lambda s, k, rows: augment.reverberate(s, k, rirs[rows]),
                  "telephone": lambda s, k, rows: augment.telephone(s, k),
                  "telephone_channel": lambda s, k, rows: augment.telephone_channel(
                      s, k, codecs[rows]),
                  "warp_vocal_tract": lambda s, k, rows: augment.warp_vocal_tract(
                      s, k, alphas[rows]),
                  "set_peak": lambda s, k, rows: augment.set_peak(s, peaks[rows])}
        for name, fn in stages.items():
            y = fn(x, n, slice(None))
            for i, w in enumerate(waves):
                alone = fn(w.unsqueeze(0), n[i:i + 1], slice(i, i + 1))[0]
                # A codec's rounding may fall the other way by one code (<= 2.5e-4).
                tol = 1e-3 if name == "telephone_channel" else 1e-5
                self.assertLess(float((y[i, :n[i]] - alone).abs().max()), tol, name)
                self.assertEqual(float(y[i, n[i]:].abs().sum()), 0.0, name)
        self.assertTrue(torch.allclose(20 * torch.log10(stages["set_peak"](x, n, slice(None))
                                                        .abs().amax(1)), peaks, atol=1e-4))

    def test_room_response_and_noise_levels(self):
        gen = torch.Generator().manual_seed(0)
        rt60 = torch.tensor([0.3, 0.2])
        rirs = augment.room_responses(rt60, torch.tensor([6.0, 12.0]), gen, "cpu")
        self.assertEqual(rirs.size(1), int(0.3 * 16000))
        self.assertTrue(bool((rirs[1, int(0.2 * 16000):] == 0).all()))
        drr = 10 * torch.log10(rirs[:, 0] ** 2 / rirs[:, 1:].pow(2).sum(1))
        self.assertTrue(torch.allclose(drr, torch.tensor([6.0, 12.0]), atol=0.01))

        x, n = padded(test_waves())
        snr = torch.tensor([10.0, 20.0, 30.0])
        noisy = augment.add_noise(x, n, snr, torch.tensor([0.0, 0.5, 1.0]), gen)
        got = 10 * torch.log10(x.pow(2).sum(1) / (noisy - x).pow(2).sum(1))
        self.assertTrue(torch.allclose(got, snr, atol=0.01), got)
        for i in range(3):
            self.assertEqual(float(noisy[i, n[i]:].abs().sum()), 0.0)

    def test_telephone_band(self):
        t = torch.arange(16000) / 16000
        x, n = padded([torch.sin(2 * math.pi * 100 * t), torch.sin(2 * math.pi * 1000 * t),
                       torch.sin(2 * math.pi * 5000 * t)])
        y = augment.telephone(x, n)
        gain = 10 * torch.log10(y[:, 2000:-2000].pow(2).mean(1) / x[:, 2000:-2000].pow(2).mean(1))
        self.assertLess(float(gain[0]), -30)
        self.assertAlmostEqual(float(gain[1]), 0.0, delta=0.2)
        self.assertLess(float(gain[2]), -30)

    def test_g711_round_trips(self):
        x = torch.linspace(-1, 32767 / 32768, 65536).unsqueeze(0)
        t = torch.arange(16000) / 8000
        sine = 0.5 * torch.sin(2 * math.pi * 440 * t).unsqueeze(0)
        for law, top in (("mu-law", 32124), ("a-law", 32256)):  # the largest codes
            y = augment.g711(x, law)
            self.assertEqual(round(float(y.max()) * 32768), top, law)
            self.assertEqual(round(float(y.min()) * 32768), -top, law)
            self.assertTrue(torch.equal(augment.g711(y, law), y), law)  # decoded values are codes
            self.assertTrue(torch.equal(augment.g711(-y, law), -y), law)
            # 256 codes; mu-law's +0 and -0 decode alike.
            self.assertEqual(len(torch.unique(y)), 255 if law == "mu-law" else 256, law)
            # Error within each segment's step: 8-bit log companding.
            small = x.abs() < 0.01
            self.assertLess(float((y - x)[small].abs().max()) * 32768, 17, law)
            ys = augment.g711(sine, law)
            snr = 10 * math.log10(float(sine.pow(2).sum() / (ys - sine).pow(2).sum()))
            self.assertGreater(snr, 35.0, law)  # G.711's ~38 dB on a loud tone
            self.assertLess(snr, 45.0, law)  # and it does quantize
        with self.assertRaises(ValueError):
            augment.g711(x, "gsm")
        # A mu-law channel differs from the plain band, and only by the codec's noise.
        x, n = padded(test_waves())
        plain = augment.telephone_channel(x, n, torch.tensor([0, 0, 0]))
        coded = augment.telephone_channel(x, n, torch.tensor([1, 2, 0]))
        self.assertTrue(torch.equal(plain[2], coded[2]))
        for i in range(2):
            err = 10 * math.log10(float(plain[i].pow(2).sum() / (coded[i] - plain[i]).pow(2).sum()))
            self.assertTrue(20.0 < err < 50.0, err)

    def test_vocal_tract_warp_moves_every_partial(self):
        t = torch.arange(32000) / 16000
        tones = (150.0, 1000.0, 2500.0)
        s = sum(a * torch.sin(2 * math.pi * f * t) for a, f in zip((0.3, 0.2, 0.1), tones))
        alphas = torch.tensor([0.88, 1.0, 1.12])
        y = augment.warp_vocal_tract(s.unsqueeze(0).repeat(3, 1), torch.tensor([32000] * 3), alphas)
        self.assertEqual(tuple(y.shape), (3, 32000))
        for i, a in enumerate(alphas.tolist()):
            seg = y[i, 4000:28000]
            spec = torch.fft.rfft(seg).abs()
            found = sorted(float(k) * 16000 / seg.numel() for k in spec.topk(3).indices)
            for got, f in zip(found, tones):
                self.assertAlmostEqual(got, f * a, delta=2.0)  # below the knee: f -> alpha f
            rms = float(seg.pow(2).mean().sqrt() / s[4000:28000].pow(2).mean().sqrt())
            self.assertGreater(rms, 0.7)
        self.assertLess(float((y[1] - s).abs().max()), 1e-3)  # alpha 1 changes nothing
        # Above the knee the map is a straight line to Nyquist, continuous and rising.
        bins = torch.linspace(0, 256, 257).unsqueeze(0).repeat(2, 1)
        w = augment.vtlp_warp(bins, torch.tensor([0.88, 1.12]))
        self.assertTrue(bool((w[:, 1:] > w[:, :-1]).all()))
        self.assertTrue(torch.allclose(w[:, -1], torch.tensor([256.0, 256.0], dtype=w.dtype)))
        src = augment.vtlp_source_bins(torch.tensor([0.88, 1.12]), 257)
        self.assertTrue(torch.allclose(augment.vtlp_warp(src, torch.tensor([0.88, 1.12])),
                                       bins.double(), atol=1e-6))

    def test_augment_batch_lengths_and_padding(self):
        waves = test_waves((0.5, 0.8, 0.3, 0.65, 0.42))
        x, n = padded(waves)
        p = augment.draw(5, torch.Generator().manual_seed(0))
        p["speed"] = torch.tensor([0.9, 1.1, 1.0, 0.9, 1.1], dtype=torch.float64)
        p["tempo"] = torch.ones(5, dtype=torch.float64)
        for key in ("reverb", "telephone", "noise"):
            p[key] = torch.ones(5, dtype=torch.bool)
        y, m = augment.augment_batch(x, n, p, torch.Generator().manual_seed(1))
        want = [augment.resampled_length(int(k), *augment.speed_rates(float(f)))
                for k, f in zip(n, p["speed"])]
        self.assertEqual(m.tolist(), want)
        self.assertEqual(y.size(1), max(want))
        self.assertTrue(bool(torch.isfinite(y).all()))
        for i in range(5):
            self.assertEqual(float(y[i, m[i]:].abs().sum()), 0.0)
            peak = 20 * math.log10(float(y[i].abs().max()))
            self.assertAlmostEqual(peak, float(p["peak_dbfs"][i]), delta=1e-3)
        self.assertTrue(torch.equal(x, padded(waves)[0]))  # the input is left as it was
        # Fresh draws over a larger batch: lengths follow each row's speed and tempo.
        x, n = padded(test_waves((0.3,) * 40))
        p = augment.draw(40, torch.Generator().manual_seed(5))
        y, m = augment.augment_batch(x, n, p, torch.Generator().manual_seed(6))
        for i in range(40):
            rate, new = augment.speed_rates(float(p["speed"][i]))
            self.assertEqual(int(m[i]), augment.tempo_length(
                augment.resampled_length(int(n[i]), rate, new), float(p["tempo"][i])))
            self.assertEqual(float(y[i, m[i]:].abs().sum()), 0.0)

    def test_one_utterance(self):
        x = torch.sin(torch.arange(16000) * 0.05) * 0.5
        for seed in range(10):
            y, desc = augment.augment(x, random.Random(seed))
            self.assertLessEqual(float(y.abs().max()), 1.0)
            self.assertAlmostEqual(20 * math.log10(float(y.abs().max())), desc["peak_dbfs"],
                                   delta=0.06)
            speed, tempo = desc.get("speed", 1.0), desc.get("tempo", 1.0)
            self.assertAlmostEqual(y.numel(), x.numel() / speed / tempo, delta=2)


def band_noise_bursts(seconds=2.0, seed=0):
    """Noise below 3.5 kHz in 100 ms bursts: no periodicity, so a
    cross-correlation peak says the lag without ambiguity."""
    n = int(16000 * seconds)
    g = torch.Generator().manual_seed(seed)
    x = augment.resample(augment.resample(torch.randn(n, generator=g) * 0.1, 16000, 7000),
                         7000, 16000)[:n]
    return x * ((torch.arange(n) // 1600) % 2)


def best_lag(x, y, span=100):
    body = slice(2000, x.numel() - 2000)
    scores = [float((x[body] * y[body.start + lag:body.stop + lag]).sum())
              for lag in range(-span, span + 1)]
    return max(range(len(scores)), key=scores.__getitem__) - span


def snr_db(x, y):
    """y's signal-to-noise ratio against x, sample by sample (no lag sought)."""
    return 10 * math.log10(float((x ** 2).sum() / ((x - y) ** 2).sum()))


def band_energy_db(x, low, high):
    spec = torch.fft.rfft(x).abs() ** 2
    freqs = torch.fft.rfftfreq(x.numel(), 1 / 16000)
    return 10 * math.log10(float(spec[(freqs >= low) & (freqs < high)].sum()) + 1e-12)


def write_corpus(d):
    """A corpus folder under d for synth.py: SENTENCES as both its training
    and its held-out sentences."""
    corpus_dir = os.path.join(d, "corpus")
    os.makedirs(corpus_dir)
    for name in ("train.txt.gz", "heldout.txt.gz"):
        with gzip.open(os.path.join(corpus_dir, name), "wt", encoding="utf-8") as f:
            f.write("\n".join(SENTENCES) + "\n")
    return corpus_dir


def spectral_centroid(x, below=5000.0):
    """Power-weighted mean frequency (Hz) of 16 kHz audio below `below`."""
    spec = torch.stft(x, 1024, 256, window=torch.hann_window(1024), return_complex=True)
    power = spec.abs().pow(2).sum(1)
    freqs = torch.fft.rfftfreq(1024, 1 / 16000)
    keep = freqs < below
    return float((power[keep] * freqs[keep]).sum() / power[keep].sum())


def median_f0(x, rate=16000):
    """Median F0 (Hz) of the clearly voiced 40 ms frames (normalised
    autocorrelation peak > 0.6 between 70 and 400 Hz)."""
    f0 = []
    for start in range(0, x.numel() - 640, 320):
        frame = x[start:start + 640] - x[start:start + 640].mean()
        ac = torch.stack([(frame[:640 - k] * frame[k:]).sum() for k in range(rate // 400,
                                                                          rate // 70)])
        energy = float((frame * frame).sum())
        if energy < 1e-6:
            continue
        k = int(ac.argmax())
        if float(ac[k]) / energy > 0.6:
            f0.append(rate / (k + rate // 400))
    return float(torch.tensor(f0).median())


@unittest.skipUnless(hts.available() and hts.find_voice() and shutil.which("festival"),
                     "libhtsengine1, festvox-us-slt-hts or festival is not installed")
class HtsVoiceTest(unittest.TestCase):
    """The HTS voice's speakers (hts.py through synth.synthesize): each
    control moves what it should, and only that."""

    TEXT = "she sells sea shells by the sea shore every morning"
    FAMILY = "festival:" + hts.VOICE

    @classmethod
    def setUpClass(cls):
        settings = {
            "default": {"stretch": 1.0, "alpha": 0.45, "half_tone": 0.0},
            "festival": {"stretch": 1.0},  # festival's own synthesis, as the evaluation set
            "alpha 0.40": {"stretch": 1.0, "alpha": 0.40, "half_tone": 0.0},
            "alpha 0.50": {"stretch": 1.0, "alpha": 0.50, "half_tone": 0.0},
            "6 half tones down": {"stretch": 1.0, "alpha": 0.45, "half_tone": -6.0},
            "slower": {"stretch": 1.25, "alpha": 0.45, "half_tone": 0.0},
        }
        with tempfile.TemporaryDirectory() as tmp:
            waves = synth.synthesize([(cls.FAMILY, cls.TEXT, s) for s in settings.values()], tmp)
        cls.x = dict(zip(settings, waves))

    def test_every_speaker_is_synthesized(self):
        for name, x in self.x.items():
            self.assertIsNotNone(x, name)
            self.assertGreater(float(x.abs().max()), 0.05, name)

    def test_the_engine_at_the_voices_settings_matches_festival(self):
        engine, festival = self.x["default"], self.x["festival"]
        self.assertAlmostEqual(engine.numel() / festival.numel(), 1.0, delta=0.03)
        self.assertAlmostEqual(median_f0(engine) / median_f0(festival), 1.0, delta=0.05)
        self.assertAlmostEqual(spectral_centroid(engine) / spectral_centroid(festival), 1.0,
                               delta=0.08)

    def test_alpha_moves_the_formants_not_the_pitch(self):
        c = {k: spectral_centroid(self.x[k]) for k in ("alpha 0.40", "default", "alpha 0.50")}
        self.assertGreater(c["alpha 0.40"], 1.08 * c["default"])  # a shorter vocal tract
        self.assertLess(c["alpha 0.50"], 0.92 * c["default"])  # a longer one
        for k in ("alpha 0.40", "alpha 0.50"):
            self.assertAlmostEqual(median_f0(self.x[k]) / median_f0(self.x["default"]), 1.0,
                                   delta=0.06, msg=k)
            self.assertEqual(self.x[k].numel(), self.x["default"].numel())

    def test_half_tones_move_the_pitch(self):
        ratio = median_f0(self.x["6 half tones down"]) / median_f0(self.x["default"])
        self.assertAlmostEqual(ratio, 2 ** (-6 / 12), delta=0.06)
        self.assertEqual(self.x["6 half tones down"].numel(), self.x["default"].numel())

    def test_stretch_slows_the_speech(self):
        self.assertAlmostEqual(self.x["slower"].numel() / self.x["default"].numel(), 1.25,
                               delta=0.06)

    def test_synth_hts_speakers_switch(self):
        with tempfile.TemporaryDirectory() as d:
            corpus_dir = write_corpus(d)
            for flag, speakers in (("--hts-speakers", True), ("--no-hts-speakers", False)):
                out = os.path.join(d, flag)
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        synth.main(["--corpus", corpus_dir, "--out", out, "--voices", self.FAMILY,
                                    "--heldout-voices", "", "--max-train", "4",
                                    "--eval-per-voice", "0", "--workers", "1",
                                    "--codec-share", "0", "--store", "wav", flag])
                finally:
                    synth.HTS_SPEAKERS = True
                with open(os.path.join(out, "synth_summary.json"), encoding="utf-8") as f:
                    self.assertEqual(json.load(f)["hts_speakers"], speakers)
                metas = [m for p in glob.glob(os.path.join(out, "train", "*.pt"))
                         for m in torch.load(p, weights_only=False)["meta"]]
                self.assertEqual(len(metas), 4)
                self.assertEqual({"alpha" in m["settings"] for m in metas}, {speakers}, flag)

    def test_training_settings_draw_a_speaker(self):
        rng = random.Random(4)
        drawn = [synth.voice_settings(self.FAMILY, rng, clean=False) for _ in range(200)]
        for key, (lo, hi) in (("alpha", hts.ALPHA_RANGE), ("half_tone", hts.HALF_TONE_RANGE)):
            values = [d[key] for d in drawn]
            self.assertTrue(lo <= min(values) and max(values) <= hi, key)
            self.assertGreater(max(values) - min(values), 0.8 * (hi - lo), key)
        self.assertEqual(synth.voice_settings(self.FAMILY, rng, clean=True), {"stretch": 1.0})


@unittest.skipUnless({"gsm", "opus"} <= set(codecs.available()),
                     "libgsm1 and libopus0 are not both installed")
class CodecTest(unittest.TestCase):
    def test_gsm_round_trip_is_narrowband_aligned_and_coded(self):
        x = band_noise_bursts()
        y, sent = codecs.gsm(x)
        self.assertEqual(y.shape, x.shape)
        self.assertEqual(sent, -(-x.numel() // 2 // 160) * 33, "33 bytes a 20 ms frame")
        self.assertEqual(best_lag(x, y), 0)
        # 8 kHz audio: nothing above 4 kHz, and about the input's level below.
        self.assertLess(band_energy_db(y, 4200, 8000), band_energy_db(y, 300, 3400) - 30)
        self.assertAlmostEqual(band_energy_db(y, 300, 3400), band_energy_db(x, 300, 3400),
                               delta=6)
        self.assertGreater(float((y - x).abs().mean()), 0.1 * float(x.abs().mean()),
                           "the codec changed the waveform")
        self.assertTrue(torch.equal(codecs.gsm(x)[0], y), "deterministic")

    def test_opus_bitrate_decides_bytes_and_fidelity(self):
        x = band_noise_bursts(seed=1)
        results = {rate: codecs.opus(x, rate) for rate in (6000, 24000)}
        for rate, (y, sent) in results.items():
            self.assertEqual(y.shape, x.shape)
            self.assertEqual(best_lag(x, y), 0, f"{rate} bit/s: the lookahead is taken off")
            self.assertAlmostEqual(sent * 8 / 2.0, rate, delta=0.5 * rate)

        def snr(y):
            return 10 * math.log10(float((x ** 2).sum() / ((x - y) ** 2).sum()))

        self.assertLess(results[6000][1], results[24000][1])
        self.assertGreater(snr(results[24000][0]), snr(results[6000][0]) + 3)

    def test_opus_packet_loss_is_concealed_and_seeded(self):
        x = band_noise_bursts(seed=2)
        clean = codecs.opus(x, 16000)[0]
        lossy = codecs.opus(x, 16000, loss=0.3, seed=5)[0]
        self.assertEqual(lossy.shape, x.shape)
        self.assertTrue(torch.isfinite(lossy).all())
        self.assertFalse(torch.equal(lossy, clean))
        self.assertTrue(torch.equal(codecs.opus(x, 16000, loss=0.3, seed=5)[0], lossy))
        self.assertFalse(torch.equal(codecs.opus(x, 16000, loss=0.3, seed=6)[0], lossy))

    def test_draw_gives_settings_round_trip_accepts(self):
        rng = random.Random(3)
        seen = set()
        x = band_noise_bursts(0.5)
        for _ in range(20):
            params = codecs.draw(rng, ["gsm", "opus"])
            seen.add(params["codec"])
            if params["codec"] == "opus":
                self.assertIn(params["bitrate"], codecs.OPUS_BITRATES)
                self.assertTrue(0.0 <= params["loss"] <= 0.05)
            self.assertEqual(codecs.round_trip(x, params).shape, x.shape)
        self.assertEqual(seen, {"gsm", "opus"})
        self.assertEqual(codecs.draw(rng, ["gsm"]), {"codec": "gsm"})
        with self.assertRaises(ValueError):
            codecs.round_trip(x, {"codec": "amr"})

    def test_synth_shard_records_its_codecs(self):
        """A training shard made with --codec-share 1: every utterance coded,
        meta says how; a whispered espeak-ng variant synthesizes."""
        with tempfile.TemporaryDirectory() as tmp:
            shard = os.path.join(tmp, "shard00000.pt")
            items = [("espeak:en-us", "the quick brown fox"), ("espeak:en-us", "jumps over it")]
            n, _ = synth._train_job((shard, 11, items, "wav", 1.0, 0.0))
            self.assertEqual(n, 2)
            meta = torch.load(shard)["meta"]
            self.assertTrue(all(m["codec"]["codec"] in codecs.available() for m in meta))
            n, _ = synth._train_job((shard + "0", 11, items, "wav", 0.0, 0.0))
            self.assertFalse(any("codec" in m for m in torch.load(shard + "0")["meta"]))
            whisper = synth.synthesize([("espeak:en-us", "hello there", {
                "variant": "whisper", "speed": 165, "pitch": 50, "amplitude": 100})], tmp)[0]
            self.assertIsNotNone(whisper)
            self.assertGreater(float(whisper.abs().max()), 0.01)


class CodecAvailabilityTest(unittest.TestCase):
    def test_available_names_the_codecs_whose_library_loads(self):
        for codec, library in codecs.LIBRARIES.items():
            try:
                ctypes.CDLL(library)
                loads = True
            except OSError:
                loads = False
            self.assertEqual(codec in codecs.available(), loads, library)

    def test_a_missing_library_is_left_out_and_said(self):
        x = band_noise_bursts(0.2)
        with mock.patch.dict(codecs._LIBS, {"g722": None}):
            self.assertNotIn("g722", codecs.available())
            with self.assertRaisesRegex(RuntimeError, "libspandsp2"):
                codecs.g722(x)


@unittest.skipUnless("g722" in codecs.available(), "libspandsp2 is not installed")
class G722Test(unittest.TestCase):
    def test_g722_round_trip_is_aligned_close_and_coded(self):
        # Noise bursts below 3.5 kHz for the lag (no periodicity to confuse
        # it), a speech-like signal (harmonics, formants) for the fidelity.
        for x in (band_noise_bursts(seed=4), frontend.synthetic_speech(2.0, 3)):
            y, sent = codecs.g722(x)
            self.assertEqual(y.shape, x.shape)
            self.assertEqual(sent, -(-(x.numel() + codecs.G722_DELAY) // 16) * 8,
                             "a byte for every two samples fed, the delay's among them")
            self.assertEqual(best_lag(x, y), 0, "the QMF filters' delay is taken off")
            # The match is best at lag 0 and falls steeply a sample either
            # way: the delay is right to the sample, not only near it.
            at = {lag: snr_db(x[100:-100], y[100 + lag:y.numel() - 100 + lag])
                  for lag in (-1, 0, 1)}
            self.assertGreater(at[0], 20.0)
            self.assertGreater(at[0], max(at[-1], at[1]) + 10)
            # ... but not a copy: ADPCM's quantization noise is there.
            self.assertLess(snr_db(x, y), 40.0, "the codec changed the waveform")
            self.assertTrue(torch.equal(codecs.g722(x)[0], y), "deterministic")

    def test_g722_keeps_the_wide_band(self):
        """Unlike GSM's 8 kHz, G.722 codes up to 7 kHz: noise up to 6.5 kHz
        comes back at about its level above 4 kHz too."""
        g = torch.Generator().manual_seed(5)
        n = 32000
        x = augment.resample(augment.resample(torch.randn(n, generator=g) * 0.1, 16000, 13000),
                             13000, 16000)[:n]
        y, _ = codecs.g722(x)
        for low, high in ((300, 3400), (4500, 6400)):
            self.assertAlmostEqual(band_energy_db(y, low, high), band_energy_db(x, low, high),
                                   delta=2, msg=f"{low}-{high} Hz")

    def test_g722_bitrate_decides_bytes_and_fidelity(self):
        x = band_noise_bursts(seed=6)
        results = {rate: codecs.g722(x, rate) for rate in codecs.G722_BITRATES}
        for rate, (y, sent) in results.items():
            self.assertEqual(y.shape, x.shape)
            self.assertEqual(best_lag(x, y), 0, f"{rate} bit/s")
            self.assertAlmostEqual(sent * 8 / 2.0, rate, delta=0.01 * rate)
        snr = {rate: snr_db(x, y) for rate, (y, _) in results.items()}
        self.assertGreater(snr[56000], snr[48000] + 2)
        self.assertGreater(snr[64000], snr[56000] + 2)
        with self.assertRaises(ValueError):
            codecs.g722(x, 32000)

    def test_draw_picks_g722_in_its_share(self):
        rng = random.Random(7)
        drawn = [codecs.draw(rng, ["gsm", "opus", "g722"]) for _ in range(1000)]
        g722 = [p for p in drawn if p["codec"] == "g722"]
        share = codecs.WEIGHTS["g722"] / sum(codecs.WEIGHTS.values())
        self.assertAlmostEqual(len(g722) / len(drawn), share, delta=0.05)
        self.assertTrue(all(p["bitrate"] in codecs.G722_BITRATES for p in g722))
        self.assertAlmostEqual(sum(p["bitrate"] == 64000 for p in g722) / len(g722), 0.5,
                               delta=0.12)
        x = band_noise_bursts(0.5)
        self.assertEqual(codecs.round_trip(x, g722[0]).shape, x.shape)
        self.assertEqual(codecs.draw(rng, ["g722"])["codec"], "g722")


class FrontendTest(unittest.TestCase):
    def test_batch_fbank_matches_reference(self):
        waves = test_waves((1.0, 0.7313, 0.41))
        waves.append(frontend.synthetic_speech(0.1, 7)[:401])  # two frames
        x, n = padded(waves)
        feats, flen = gpu_frontend.BatchFbank("cpu")(x, n)
        self.assertEqual(flen.tolist(), [1 + (int(k) - 400) // 160 for k in n])
        self.assertEqual(feats.shape, (4, int(flen.max()), 80))
        for i, w in enumerate(waves):
            ref = frontend.fbank(w)
            self.assertEqual(ref.size(0), int(flen[i]))
            self.assertLess(float((feats[i, :flen[i]] - ref).abs().max()), 1e-3)
            self.assertEqual(float(feats[i, flen[i]:].abs().sum()), 0.0)

    def test_wave_store_round_trip(self):
        g = torch.Generator().manual_seed(0)
        wavs = [torch.randint(-32768, 32768, (k,), generator=g, dtype=torch.int16)
                for k in (500, 1234, 77, 900)]
        store = gpu_frontend.WaveStore(wavs, "cpu")
        x, n = store.batch([2, 1, 3])
        self.assertEqual(n.tolist(), [77, 1234, 900])
        self.assertEqual(tuple(x.shape), (3, 1234))
        for row, i in enumerate([2, 1, 3]):
            self.assertTrue(torch.equal(x[row, :n[row]], wavs[i].float() / 32768.0))
            self.assertEqual(float(x[row, n[row]:].abs().sum()), 0.0)

    def test_appended_store_keeps_old_batches(self):
        """A store appended to gives the batches it gave before for the old
        indices, and the new utterances at the next indices (waveforms and
        features, as train.py --reload-shards appends them)."""
        g = torch.Generator().manual_seed(1)
        wavs = [torch.randint(-32768, 32768, (k,), generator=g, dtype=torch.int16)
                for k in (500, 1234, 77, 900, 333, 1500)]
        feats = [torch.randn(k, 80, generator=g).to(torch.float16) for k in (12, 40, 7, 25, 3, 60)]
        for store, items in ((gpu_frontend.WaveStore(wavs[:4], "cpu"), wavs),
                             (train.FeatureStore(feats[:4], "cpu"), feats)):
            before = [store.batch(idx) for idx in ([2, 1, 3], [0], [3, 2])]
            store.append([])
            store.append(items[4:5])
            store.append(items[5:])
            self.assertEqual(len(store), 6)
            for idx, (x, n) in zip(([2, 1, 3], [0], [3, 2]), before):
                x2, n2 = store.batch(idx)
                self.assertTrue(torch.equal(x, x2) and torch.equal(n, n2))
            fresh = type(store)(items, "cpu")
            for idx in ([5, 4], [4, 0, 5], [1, 5]):
                x, n = store.batch(idx)
                x2, n2 = fresh.batch(idx)
                self.assertTrue(torch.equal(x, x2) and torch.equal(n, n2))
            self.assertEqual(store.flat.dtype, items[0].dtype)
        data = gpu_frontend.WaveFeatures(wavs[:4], "cpu", online_augment=False)
        data.append(wavs[4:])
        self.assertEqual(len(data), 6)
        x, n = data.store.batch([5])
        self.assertTrue(torch.equal(x[0], wavs[5].float() / 32768.0))

    def test_wave_features_batch(self):
        """Gather, fresh augmentation and fbank: frames follow the augmented
        lengths, padding frames are zero, two draws differ."""
        wavs = [(w * 32767).round().to(torch.int16) for w in test_waves((0.5, 0.8, 0.3, 0.65))]
        data = gpu_frontend.WaveFeatures(wavs, "cpu", online_augment=True, seed=3)
        feats, flen = data.batch([3, 0, 2])
        data.reseed(3)
        wav, n = data.waveforms([3, 0, 2])
        self.assertEqual(flen.tolist(), [1 + (int(k) - 400) // 160 for k in n])
        self.assertEqual(feats.shape, (3, int(flen.max()), 80))
        for i in range(3):
            self.assertEqual(float(feats[i, flen[i]:].abs().sum()), 0.0)
            self.assertTrue(bool(torch.isfinite(feats[i, :flen[i]]).all()))
        self.assertFalse(torch.equal(data.batch([3, 0, 2])[0], feats))  # a fresh draw
        data.reseed(3)
        self.assertTrue(torch.equal(data.batch([3, 0, 2])[0], feats))

    def test_non_speech_clips(self):
        n = torch.randint(8000, 32000, (240,), generator=torch.Generator().manual_seed(0))
        clips, kind = augment.non_speech(n, 32000, torch.Generator().manual_seed(1),
                                         torch.Generator().manual_seed(2), "cpu")
        self.assertEqual(sorted(kind.unique().tolist()), [0, 1, 2, 3])
        for i in range(240):
            m = int(n[i])
            self.assertEqual(float(clips[i, m:].abs().sum()), 0.0)
            self.assertLessEqual(float(clips[i].abs().max()), 1.0)
            level = 20 * math.log10(float(clips[i, :m].pow(2).mean().sqrt()))
            lo, hi = augment.SILENCE_RMS_DBFS if kind[i] == 0 else augment.NON_SPEECH_RMS_DBFS
            self.assertGreater(level, lo - 3.0)  # clicks may clip at the top
            self.assertLess(level, hi + 0.01)
        # Hum: the mains frequency and its harmonics hold the energy.
        i = int((kind == 2).nonzero()[0])
        spec = torch.fft.rfft(clips[i, :int(n[i])]).abs().pow(2)
        hz = torch.arange(spec.numel()) * 16000 / int(n[i])
        harmonic = torch.zeros_like(spec, dtype=torch.bool)
        for f in augment.HUM_HZ:
            for h in range(1, 6):
                harmonic |= (hz - f * h).abs() < 3.0
        self.assertGreater(float(spec[harmonic].sum() / spec.sum()), 0.9)
        # The same generators give the same clips.
        again, _ = augment.non_speech(n, 32000, torch.Generator().manual_seed(1),
                                      torch.Generator().manual_seed(2), "cpu")
        self.assertTrue(torch.equal(again, clips))

    def test_wave_features_with_non_speech_clips(self):
        wavs = [(w * 32767).round().to(torch.int16) for w in test_waves((0.9, 0.8, 0.7))]
        data = gpu_frontend.WaveFeatures(wavs, "cpu", online_augment=True, seed=3)
        feats, flen = data.batch([0, 1, 2], non_speech=4)
        data.reseed(3)
        _, n = data.waveforms([0, 1, 2])
        self.assertEqual(feats.size(0), 7)
        self.assertEqual(flen[:3].tolist(), [1 + (int(k) - 400) // 160 for k in n])
        self.assertEqual(feats.size(1), int(flen.max()))
        self.assertEqual(int(flen.max()), int(flen[:3].max()))  # the clips fit the batch
        for i in range(3, 7):
            self.assertGreaterEqual(int(flen[i]), 1 + (8000 - 400) // 160)
            self.assertEqual(float(feats[i, flen[i]:].abs().sum()), 0.0)
            self.assertTrue(bool(torch.isfinite(feats[i, :flen[i]]).all()))

    def test_feature_store_with_non_speech_clips(self):
        feats = [frontend.fbank(w).to(torch.float16) for w in test_waves((0.9, 0.8, 0.7))]
        store = train.FeatureStore(feats, "cpu", seed=3)
        x, n = store.batch([0, 1, 2], non_speech=4)
        plain, plain_n = store.batch([0, 1, 2])
        self.assertEqual(x.size(0), 7)
        self.assertEqual(n[:3].tolist(), [f.size(0) for f in feats])
        self.assertTrue(torch.equal(x[:3, :plain.size(1)], plain))  # the utterances as stored
        self.assertEqual(x.size(1), int(plain_n.max()))  # the clips fit the batch
        for i in range(3, 7):
            self.assertGreaterEqual(int(n[i]), 1 + (8000 - 400) // 160)
            self.assertEqual(float(x[i, n[i]:].abs().sum()), 0.0)
            self.assertTrue(bool(torch.isfinite(x[i, :n[i]]).all()))
        store.reseed(3)
        again, again_n = store.batch([0, 1, 2], non_speech=4)
        self.assertTrue(torch.equal(again, x) and torch.equal(again_n, n))  # resumable

    def test_cmvn_over_clean_waveforms(self):
        waves = test_waves((0.6, 0.45, 0.3))
        data = gpu_frontend.WaveFeatures([synth.to_int16(w) for w in waves], "cpu", False)
        stats = train.cmvn_stats(data, [[0, 2], [1]])
        ref = frontend.cmvn_stats(torch.cat([frontend.fbank(synth.to_int16(w) / 32768.0)
                                             for w in waves]))
        self.assertEqual(stats["frame_num"], ref["frame_num"])
        for key in ("mean_stat", "var_stat"):
            self.assertTrue(torch.allclose(torch.tensor(stats[key]), torch.tensor(ref[key]),
                                           rtol=1e-5), key)
        # 1100 / 1.1 / 1.15 and 16000 / 1.1 / 1.15 (the fastest speed and tempo).
        self.assertEqual(gpu_frontend.shortest_samples(torch.tensor([1100, 16000]), True).tolist(),
                         [870, 12649])


class MaskTest(unittest.TestCase):
    def test_attention_mask(self):
        m = attention_mask(torch.tensor([5, 3]), 5, 2, 1)
        self.assertEqual(tuple(m.shape), (2, 1, 5, 5))
        # Frame 4 (chunk 2) sees chunks 1 and 2: frames 2..4.
        self.assertEqual(m[0, 0, 4].tolist(), [False, False, True, True, True])
        # Utterance 2 has 3 valid frames: keys 3, 4 hidden; padded query 4
        # sees valid frame 2 (chunk 1) and itself.
        self.assertEqual(m[1, 0, 2].tolist(), [True, True, True, False, False])
        self.assertEqual(m[1, 0, 4].tolist(), [False, False, True, False, True])
        m = attention_mask(torch.tensor([2]), 5, 1, 0)
        self.assertEqual(m[0, 0, 3].tolist(), [False, False, False, True, False])
        full = attention_mask(torch.tensor([4]), 4, 0, -1)
        self.assertTrue(bool(full.all()))

    def test_dynamic_chunk_rule(self):
        rng = random.Random(0)
        seen = [dynamic_chunk(100, rng) for _ in range(2000)]
        full = sum(1 for c, _ in seen if c == 0)
        self.assertAlmostEqual(full / 2000, 0.5, delta=0.05)
        self.assertTrue(all(1 <= c <= 25 for c, _ in seen if c))
        self.assertTrue(any(l == -1 for c, l in seen if c) and any(l >= 0 for c, l in seen if c))

    def test_freq_warp(self):
        f = 80
        x = torch.zeros(2, 3, f)
        x[:, :, 30] = 1.0  # one formant-like peak at bin 30
        x[:, :, f - 1] = 2.0
        same = freq_warp(x, torch.Generator().manual_seed(0), 0.0)
        self.assertTrue(torch.allclose(same, x))
        # prob 1: every utterance warped; the peak moves to 30 * alpha, the top bin stays.
        y = freq_warp(x, torch.Generator().manual_seed(3), 0.1, prob=1.0)
        self.assertEqual(tuple(y.shape), tuple(x.shape))
        for b in range(2):
            centre = float((y[b, 0, :60] * torch.arange(60)).sum() / y[b, 0, :60].sum())
            self.assertGreater(abs(centre - 30), 0.05)
            self.assertLess(abs(centre - 30), 30 * 0.1 + 1e-3)
            self.assertAlmostEqual(float(y[b, 0, f - 1]), 2.0, places=5)
            self.assertTrue(torch.equal(y[b, 0], y[b, 2]))  # same warp over time
        # Different utterances get different factors.
        self.assertFalse(torch.allclose(y[0], y[1]))

    def test_greedy(self):
        lp = torch.log(torch.tensor([[.1, .9, 0], [.1, .9, 0], [.9, .1, 0], [.1, .9, 0],
                                     [0, 0, 1.]]) + 1e-9)
        self.assertEqual(greedy_decode(lp, 5), [1, 1, 2])
        self.assertEqual(greedy_decode(lp, 2), [1])


class ForwardTest(unittest.TestCase):
    def test_matches_reference_and_ignores_padding(self):
        cfg = ModelConfig(output_dim=20, output_size=32, attention_heads=4, linear_units=48,
                          num_blocks=2)
        model = randomize_(ConformerCtcModel(cfg), 3)
        feats = torch.randn(2, 90, 80) * 3
        lengths = torch.tensor([90, 61])
        pos = PositionCache(32)
        with torch.no_grad():
            lp, out_len = encode(model, feats, lengths, 4, 2, pos)
            self.assertEqual(out_len.tolist(), output_lengths(lengths).tolist())
            for b in range(2):
                ref = model.log_probs_full(feats[b:b + 1, : lengths[b]], 4, 2)[0]
                n = int(out_len[b])
                self.assertEqual(ref.size(0), n)
                self.assertLess(float((lp[b, :n] - ref).abs().max()), 1e-4)
            # Full context: the padded utterance must still match its own forward.
            lp, out_len = encode(model, feats, lengths, 0, -1, pos)
            ref = model.log_probs_full(feats[1:2, :61], 0)[0]
            self.assertLess(float((lp[1, : ref.size(0)] - ref).abs().max()), 1e-4)

    def test_one_step_lowers_loss(self):
        torch.manual_seed(0)
        cfg = ModelConfig(output_dim=12, output_size=32, attention_heads=4, linear_units=48,
                          num_blocks=1)
        model = ConformerCtcModel(cfg).train()
        feats = torch.randn(2, 80, 80)
        lengths = torch.tensor([80, 70])
        targets = torch.tensor([3, 4, 5, 6, 7, 3, 4])
        tlens = torch.tensor([4, 3])
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        ctc = torch.nn.CTCLoss(zero_infinity=True)
        pos = PositionCache(32)
        losses = []
        for _ in range(5):
            lp, out_len = encode(model, feats, lengths, 4, -1, pos)
            loss = ctc(lp.transpose(0, 1), targets, out_len, tlens)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        self.assertLess(losses[-1], losses[0])


SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "she sells sea shells",
             "we like to read books", "my hat is red and blue", "ten men went to town"]


def write_shard(path, kind, first, count=6):
    """A synth.py shard of `count` synthetic utterances (1.3-2 s) of SENTENCES."""
    utts, meta = [], []
    for k in range(first, first + count):
        x = frontend.synthetic_speech(1.3 + 0.1 * (k % 8), k)
        utts.append(synth.to_int16(x) if kind == "wavs" else frontend.fbank(x).to(torch.float16))
        meta.append({"text": SENTENCES[k % len(SENTENCES)], "voice": f"espeak:v{k % 2}",
                     "settings": {}, "seconds": round(x.numel() / 16000, 3)})
    torch.save({kind: utts, "meta": meta}, path)


class ReloadShardsTest(unittest.TestCase):
    """train.py --reload-shards: a shard written between epochs joins the
    next epoch; a resumed run loads every shard there is; feature shards too."""

    def run_train(self, d, max_steps, extra=(), hook=None):
        args = ["--data", os.path.join(d, "data"), "--tokenizer", os.path.join(d, "tok"),
                "--work", os.path.join(d, "train"), "--max-steps", str(max_steps),
                "--num-blocks", "1", "--output-size", "32", "--heads", "4",
                "--linear-units", "48", "--batch-frames", "500", "--device", "cpu",
                "--threads", "1", "--warmup-steps", "2", "--log-every", "1",
                "--ckpt-minutes", "100", *extra]
        sizes = []  # the utterance count of every epoch's batch list (and CMVN's pass)

        def make_batches(lengths, *rest, **kw):
            sizes.append(len(lengths))
            return real_make_batches(lengths, *rest, **kw)

        real_make_batches = train.make_batches
        out = io.StringIO()
        with mock.patch.object(train, "make_batches", make_batches), \
                contextlib.redirect_stdout(out):
            train.main(args, epoch_hook=hook)
        with open(os.path.join(d, "train", "train_summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        return summary, sizes, out.getvalue()

    def test_shard_written_between_epochs(self):
        for kind in ("wavs", "feats"):
            with self.subTest(kind=kind), tempfile.TemporaryDirectory() as d:
                os.makedirs(os.path.join(d, "data", "train"))
                os.makedirs(os.path.join(d, "tok"))
                tokenizer.train_bpe(SENTENCES * 5, os.path.join(d, "tok", "bpe"), 40)
                shard = os.path.join(d, "data", "train", "shard%05d.pt")
                write_shard(shard % 0, kind, 0)
                epochs = []

                def hook(epoch):
                    epochs.append(epoch)
                    if epoch == 2:
                        write_shard(shard % 1, kind, 6)

                summary, sizes, log = self.run_train(d, 12, hook=hook)
                self.assertEqual(summary["steps"], 12)
                self.assertGreaterEqual(summary["epochs"], 3, log)
                self.assertEqual(summary["data"], kind)
                self.assertEqual((summary["utterances"], summary["utterances_added"]), (12, 6))
                self.assertIn("data: +6 utterances", log)
                # Epochs 0-2 over the first shard, the later ones over both.
                self.assertEqual(sizes[:4], [6, 6, 6, 12], log)
                self.assertTrue(all(n == 12 for n in sizes[4:]), sizes)

                # Resumed with a third shard: it is loaded at the start.
                write_shard(shard % 2, kind, 12)
                summary, sizes, log = self.run_train(d, 15)
                self.assertIn("resumed from", log)
                self.assertEqual((summary["steps"], summary["utterances"]), (15, 18))
                self.assertEqual(summary["utterances_added"], 0)
                self.assertEqual(set(sizes), {18})

                # --no-reload-shards keeps the data of the start.
                write_shard(shard % 3, kind, 18)
                summary, sizes, log = self.run_train(
                    d, 22, ["--no-reload-shards"], lambda e: write_shard(shard % 4, kind, 24))
                self.assertEqual((summary["steps"], summary["utterances"]), (22, 24))
                self.assertNotIn("data: +", log)


class NoiseClipsTest(unittest.TestCase):
    run_train = ReloadShardsTest.run_train

    def test_training_with_non_speech_clips(self):
        for kind in ("wavs", "feats"):
            with self.subTest(kind=kind):
                self.train_with_non_speech_clips(kind)

    def train_with_non_speech_clips(self, kind):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "data", "train"))
            os.makedirs(os.path.join(d, "tok"))
            tokenizer.train_bpe(SENTENCES * 5, os.path.join(d, "tok", "bpe"), 40)
            write_shard(os.path.join(d, "data", "train", "shard00000.pt"), kind, 0)
            empty_rows = []
            real_ctc = torch.nn.CTCLoss.forward

            def ctc(self_, logp, targets, out_len, tlens):
                empty_rows.append(int((tlens == 0).sum()))
                return real_ctc(self_, logp, targets, out_len, tlens)

            with mock.patch.object(torch.nn.CTCLoss, "forward", ctc):
                summary, _, log = self.run_train(d, 4, ["--noise-clips", "1.0"])
            self.assertEqual((summary["steps"], summary["noise_clips"]), (4, 1.0))
            # As many empty transcripts as utterances in every batch.
            self.assertEqual(len(empty_rows), 4)
            self.assertTrue(all(k >= 1 for k in empty_rows), empty_rows)
            self.assertNotIn("nan", log)
            summary, _, _ = self.run_train(d, 6, ["--noise-clips", "0"])
            self.assertEqual(summary["noise_clips"], 0.0)


class EdgeTrimTest(unittest.TestCase):
    """augment.trim_edges: the silence around the speech cut to the drawn
    lengths, the speech itself untouched; synth.py's shards record it."""

    def test_silence_cut_around_the_speech(self):
        t = torch.arange(8000) / 16000.0
        tone = 0.3 * torch.sin(2 * math.pi * 440.0 * t)
        quiet = torch.zeros(4800)
        x = torch.cat([quiet, tone, torch.zeros(6400)])  # 0.3 s, 0.5 s, 0.4 s
        for seed in range(20):
            y, (lead, trail) = augment.trim_edges(x, random.Random(seed))
            self.assertTrue(0.0 <= lead <= 0.1 + 1e-9, lead)
            self.assertTrue(0.02 <= trail <= 0.15 + 1e-9, trail)
            self.assertAlmostEqual(y.numel(), 8000 + (lead + trail) * 16000, delta=16)
            start = int(y.nonzero()[0]) - 1  # the tone's first sample is 0
            self.assertAlmostEqual(start, lead * 16000, delta=8)
            self.assertTrue(torch.equal(y[start:start + 8000], tone))  # the speech whole

    def test_nothing_to_cut(self):
        tone = 0.3 * torch.sin(2 * math.pi * 300.0 * torch.arange(4000) / 16000.0)
        y, edges = augment.trim_edges(tone, random.Random(1))  # speech from end to end
        self.assertTrue(torch.equal(y, tone))
        self.assertEqual(edges, (0.0, 0.0))
        silent = torch.zeros(3200)
        y, edges = augment.trim_edges(silent, random.Random(1))
        self.assertTrue(torch.equal(y, silent))
        # A quiet tail above the floor (-40 dB of the peak) is speech: kept.
        tail = 0.003 * torch.sin(2 * math.pi * 3000.0 * torch.arange(1600) / 16000.0)
        x = torch.cat([tone, tail, torch.zeros(4800)])
        y, (_, trail) = augment.trim_edges(x, random.Random(2))
        self.assertTrue(torch.equal(y[:5600], x[:5600]))

    def test_synth_shard_records_its_edges(self):
        with tempfile.TemporaryDirectory() as tmp:
            shard = os.path.join(tmp, "shard00000.pt")
            items = [("espeak:en-us", "the quick brown fox"), ("espeak:en-us", "jumps over it")]
            synth._train_job((shard, 11, items, "wav", 0.0, 1.0))
            meta = torch.load(shard)["meta"]
            self.assertEqual(len(meta), 2)
            for m in meta:
                lead, trail = m["edges"]
                self.assertTrue(0.0 <= lead <= 0.1 and 0.0 <= trail <= 0.15, m["edges"])
            synth._train_job((shard + "0", 11, items, "wav", 0.0, 0.0))
            self.assertFalse(any("edges" in m for m in torch.load(shard + "0")["meta"]))


class ShortPhraseTest(unittest.TestCase):
    """synth.train_plan's short share: that share of utterances says 1-3
    consecutive words of its sentence; families and sentences stay the plan
    they are without it."""

    def test_share_of_short_phrases(self):
        sentences = [" ".join(f"w{i}x{k}" for k in range(3 + i % 20)) for i in range(500)]
        families = ["espeak:en-us", "espeak:en", "flite:kal", "festival:kal_diphone"]
        plain = synth.train_plan(sentences, families, 4000, 5)
        self.assertEqual(plain, synth.train_plan(sentences, families, 4000, 5, 0.0))
        mixed = synth.train_plan(sentences, families, 4000, 5, 0.3)
        self.assertEqual([f for f, _ in mixed], [f for f, _ in plain])
        lengths = {1: 0, 2: 0, 3: 0}
        for (_, whole), (_, said) in zip(plain, mixed):
            if said == whole:
                continue
            n = len(said.split())
            lengths[n] += 1
            self.assertIn(f" {said} ", f" {whole} ")  # consecutive words of it
        short = sum(lengths.values())
        self.assertAlmostEqual(short / 4000, 0.3, delta=0.03)
        for n, odds in synth.SHORT_WORDS:
            self.assertAlmostEqual(lengths[n] / short, odds, delta=0.05)
        # The first N utterances do not depend on the plan's size.
        self.assertEqual(synth.train_plan(sentences, families, 100, 5, 0.3), mixed[:100])

    def test_a_short_sentence_is_never_exceeded(self):
        rng = random.Random(3)
        for _ in range(200):
            self.assertEqual(synth.short_phrase("one", rng), "one")
            self.assertIn(synth.short_phrase("one two", rng), ("one", "two", "one two"))


@unittest.skipUnless(shutil.which("espeak-ng"), "espeak-ng is not installed")
class SynthAugmentTest(unittest.TestCase):
    """synth.py --augment: feature shards made with the stages' probabilities
    given (here: no vocal-tract warp, the telephone channel always), and the
    summary says which; refused for waveform shards."""

    def test_feature_shards_with_other_probabilities(self):
        saved = augment.set_probabilities("")
        with tempfile.TemporaryDirectory() as d:
            corpus_dir = write_corpus(d)
            out = os.path.join(d, "data")
            args = ["--corpus", corpus_dir, "--out", out, "--voices", "espeak:en-us",
                    "--heldout-voices", "", "--max-train", "12", "--eval-per-voice", "0",
                    "--workers", "1", "--codec-share", "0", "--short-share", "0.5",
                    "--store", "feats"]
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    synth.main(args + ["--augment", "vtlp=0,telephone=1"])
                with self.assertRaisesRegex(SystemExit, "--store feats"):
                    synth.main(args[:-2] + ["--store", "wav", "--augment", "vtlp=0"])
                with self.assertRaisesRegex(SystemExit, "unknown augmentation stage"):
                    synth.main(args + ["--augment", "pitch=0.5"])
            finally:
                augment.set_probabilities(",".join(f"{k}={v}" for k, v in saved.items()))
            with open(os.path.join(out, "synth_summary.json"), encoding="utf-8") as f:
                summary = json.load(f)
            self.assertEqual((summary["augment"]["vtlp"], summary["augment"]["telephone"]),
                             (0.0, 1.0))
            self.assertEqual(summary["augment"]["noise"], saved["noise"])
            self.assertEqual(summary["short_share"], 0.5)
            self.assertEqual(summary["edge_trim"], 0.5)
            metas = [m for p in glob.glob(os.path.join(out, "train", "*.pt"))
                     for m in torch.load(p, weights_only=False)["meta"]]
            self.assertEqual(len(metas), 12)
            self.assertTrue(all("telephone" in m["aug"] for m in metas))
            self.assertFalse(any("vtlp_alpha" in m["aug"] for m in metas))
            self.assertTrue(any(len(m["text"].split()) <= 3 for m in metas))


def setup_run(d):
    """A training run's inputs under d: a tokenizer and one feature shard of
    6 utterances (voices espeak:v0 and espeak:v1)."""
    os.makedirs(os.path.join(d, "data", "train"))
    os.makedirs(os.path.join(d, "tok"))
    tokenizer.train_bpe(SENTENCES * 5, os.path.join(d, "tok", "bpe"), 40)
    write_shard(os.path.join(d, "data", "train", "shard00000.pt"), "feats", 0)


class ExcludeVoicesTest(unittest.TestCase):
    """train.py --exclude-voices: the matching families' utterances are not
    trained on (leave-one-family-out from one synthesis), in the first
    shards and in those loaded later."""

    run_train = ReloadShardsTest.run_train

    def test_a_family_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            setup_run(d)
            summary, sizes, log = self.run_train(d, 2, ["--exclude-voices", "espeak:v1"])
            self.assertEqual(summary["utterances"], 3)
            self.assertEqual(summary["excluded_voices"], ["espeak:v1"])
            self.assertIn("data: 3 utterances of espeak:v1 left out", log)
            self.assertEqual(set(sizes), {3})
            # A shard that appears between epochs: its espeak:v1 half is left out too.
            shutil.rmtree(os.path.join(d, "train"))

            def hook(epoch):
                if epoch == 1:
                    write_shard(os.path.join(d, "data", "train", "shard00001.pt"), "feats", 6)

            summary, sizes, log = self.run_train(d, 8, ["--exclude-voices", "espeak:v1"], hook)
            self.assertIn("data: +3 utterances", log)
            self.assertEqual((summary["utterances"], summary["utterances_added"]), (6, 3))
            self.assertEqual(sizes[-1], 6)

    def test_every_family_left_out_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            setup_run(d)
            with self.assertRaisesRegex(SystemExit, "no training utterances left"):
                self.run_train(d, 2, ["--exclude-voices", "espeak:*"])


class InitTest(unittest.TestCase):
    """train.py --init: a run starts from an exported model directory's
    weights and CMVN; another geometry or other units are refused."""

    run_train = ReloadShardsTest.run_train

    def first_export(self, d, steps):
        """A run's folder set up (setup_run) and its export after `steps`
        steps; the run's work folder removed, so the next run starts afresh."""
        setup_run(d)
        first = os.path.join(d, "first")
        self.run_train(d, steps, ["--export", first])
        shutil.rmtree(os.path.join(d, "train"))
        return first

    def test_a_run_starts_from_the_exported_weights(self):
        with tempfile.TemporaryDirectory() as d:
            first = self.first_export(d, 3)
            # Learning rate ~0: the second export is the first, rounded the same way.
            second = os.path.join(d, "second")
            summary, _, log = self.run_train(d, 1, ["--init", first, "--export", second,
                                                    "--lr", "1e-30", "--dropout", "0"])
            self.assertIn(f"initialized from {first}", log)
            self.assertEqual(summary["init"], first)
            a = model_dir.load_model_dir(first).state_dict()
            b = model_dir.load_model_dir(second).state_dict()
            self.assertEqual(a.keys(), b.keys())
            for k in a:
                self.assertTrue(torch.equal(a[k], b[k]), k)
            # Without --init the same run starts elsewhere (and its CMVN is its own pass's).
            shutil.rmtree(os.path.join(d, "train"))
            third = os.path.join(d, "third")
            self.run_train(d, 1, ["--export", third, "--lr", "1e-30", "--seed", "7"])
            c = model_dir.load_model_dir(third).state_dict()
            self.assertFalse(torch.equal(a["ctc.ctc_lo.weight"], c["ctc.ctc_lo.weight"]))

    def test_another_geometry_or_other_units_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            first = self.first_export(d, 1)
            with self.assertRaisesRegex(SystemExit, "another geometry"):
                self.run_train(d, 1, ["--init", first, "--linear-units", "64"])
            units = os.path.join(first, "units.txt")
            with open(units, encoding="utf-8") as f:
                lines = f.readlines()
            with open(units, "w", encoding="utf-8") as f:
                f.writelines(lines[:-2] + lines[-1:])
            with self.assertRaisesRegex(SystemExit, "units.txt is not this tokenizer's"):
                self.run_train(d, 1, ["--init", first])


class CheckpointTest(unittest.TestCase):
    def test_round_trip_in_small_parts(self):
        state = {"model": {"w": torch.randn(1000, 30), "b": torch.arange(7)},
                 "opt": {"state": {0: {"step": torch.tensor(3.0)}}, "groups": [{"lr": 0.1}]},
                 "step": 12, "t": (1, "x")}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt", "step12")
            checkpoint.save(state, path, max_bytes=20000)
            parts = [f for f in os.listdir(path) if f.startswith("part")]
            self.assertGreater(len(parts), 5)
            self.assertEqual(checkpoint.latest(os.path.join(d, "ckpt")), path)
            back = checkpoint.load(path)
            self.assertTrue(torch.equal(back["model"]["w"], state["model"]["w"]))
            self.assertTrue(torch.equal(back["model"]["b"], state["model"]["b"]))
            self.assertEqual(back["opt"]["state"][0]["step"].item(), 3.0)
            self.assertEqual(back["step"], 12)
            self.assertEqual(back["t"], (1, "x"))

    def test_split_and_join_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "blob")
            data = os.urandom(10000)
            with open(path, "wb") as f:
                f.write(data)
            files = checkpoint.split_file(path, 3000)
            self.assertEqual(len(files), 5)  # 4 parts + sha256
            self.assertFalse(os.path.exists(path))
            checkpoint.main(["join", path] + [f for f in files if ".part" in f])
            with open(path, "rb") as f:
                self.assertEqual(f.read(), data)
            with open(files[0], "wb") as f:
                f.write(b"corrupt")
            os.remove(path)
            with self.assertRaises(ValueError):
                checkpoint.main(["join", path] + [f for f in files if ".part" in f])


if __name__ == "__main__":
    unittest.main()
