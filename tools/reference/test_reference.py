"""Unit tests of the reference model (run with /usr/bin/python3 -m unittest)."""

import hashlib
import math
import os
import tempfile
import unittest

import torch

from . import frontend, model_dir, safetensors_io
from .model import (ConformerCtcModel, ModelConfig, chunk_mask, position_table, randomize_,
                    subsampling_right_context)


def small_config(**kw):
    base = dict(output_dim=23, output_size=48, attention_heads=4, linear_units=96,
                num_blocks=2, cnn_module_kernel=7)
    base.update(kw)
    return ModelConfig(**base)


def random_feats(frames, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, frames, 80, generator=g)


class ChunkMaskTest(unittest.TestCase):
    def test_matches_loop_definition(self):
        for size, chunk, left in [(10, 3, -1), (17, 4, 2), (9, 16, -1), (12, 2, 0)]:
            m = chunk_mask(size, chunk, left)
            for i in range(size):
                start = 0 if left < 0 else max((i // chunk - left) * chunk, 0)
                end = min((i // chunk + 1) * chunk, size)
                for j in range(size):
                    self.assertEqual(bool(m[i, j]), start <= j < end, (size, chunk, left, i, j))


class PositionTableTest(unittest.TestCase):
    def test_interleaved_sinusoid(self):
        d = 16
        pe = position_table(3, 5, d)
        for p in range(3, 8):
            for i in range(d // 2):
                w = math.exp(-2 * i * math.log(10000.0) / d)
                self.assertAlmostEqual(pe[p - 3, 2 * i].item(), math.sin(p * w), places=5)
                self.assertAlmostEqual(pe[p - 3, 2 * i + 1].item(), math.cos(p * w), places=5)

    def test_rows_do_not_depend_on_start(self):
        full = position_table(0, 6000, 32)
        self.assertTrue(torch.equal(full[4990:5010], position_table(4990, 20, 32)))


class StreamingEqualsFullTest(unittest.TestCase):
    def check(self, cfg, frames, runs, tol=2e-5):
        model = randomize_(ConformerCtcModel(cfg), seed=5)
        feats = random_feats(frames)
        with torch.no_grad():
            for chunk, left in runs:
                full = model.log_probs_full(feats, chunk, left)
                stream = model.log_probs_streaming(feats, chunk, left)
                self.assertEqual(full.shape, stream.shape)
                diff = (full - stream).abs().max().item()
                self.assertLess(diff, tol, f"{cfg.input_layer} chunk {chunk} left {left}")

    def test_layer_norm_conv(self):
        self.check(small_config(), 300, [(4, -1), (8, 2), (16, -1), (16, 1), (5, 0)])

    def test_batch_norm_conv(self):
        self.check(small_config(cnn_module_norm="batch_norm", cnn_module_kernel=8), 250,
                   [(4, 2), (8, -1)])

    def test_subsampling_variants(self):
        for layer in ("conv2d6", "conv2d8"):
            self.check(small_config(input_layer=layer), 330, [(4, -1), (6, 2)])

    def test_short_last_chunk_and_output_length(self):
        cfg = small_config()
        model = randomize_(ConformerCtcModel(cfg), seed=1)
        for frames in (7, 8, 70, 71, 73):
            feats = random_feats(frames)
            with torch.no_grad():
                out = model.log_probs_streaming(feats, 16)
            self.assertEqual(out.size(1), ((frames - 1) // 2 - 1) // 2)
        self.assertEqual(subsampling_right_context("conv2d"), 6)

    def test_chunk_mask_changes_result(self):
        # Guards the test above against a mask that does nothing.
        model = randomize_(ConformerCtcModel(small_config()), seed=2)
        feats = random_feats(200)
        with torch.no_grad():
            a = model.log_probs_full(feats, 4, -1)
            b = model.log_probs_full(feats, 0, -1)
        self.assertGreater((a - b).abs().max().item(), 1e-3)

    def test_offset_shifts_positions(self):
        model = randomize_(ConformerCtcModel(small_config()), seed=3)
        feats = random_feats(100)
        with torch.no_grad():
            a = model.log_probs_streaming(feats, 8, -1, start_offset=0)
            b = model.log_probs_streaming(feats, 8, -1, start_offset=5000)
        self.assertGreater((a - b).abs().max().item(), 1e-4)


class StateDictNamesTest(unittest.TestCase):
    def test_names_are_wenets(self):
        """Exactly spec section 5's names, so checkpoints load both ways."""
        model = ConformerCtcModel(small_config(num_blocks=1, cnn_module_norm="batch_norm"))
        names = set(model.weights_state_dict())
        layer = "encoder.encoders.0."
        expected = {"encoder.global_cmvn.mean", "encoder.global_cmvn.istd",
                    "encoder.after_norm.weight", "encoder.after_norm.bias",
                    "ctc.ctc_lo.weight", "ctc.ctc_lo.bias",
                    layer + "self_attn.linear_pos.weight", layer + "self_attn.pos_bias_u",
                    layer + "self_attn.pos_bias_v",
                    layer + "conv_module.norm.running_mean", layer + "conv_module.norm.running_var"}
        for prefix in ("encoder.embed.conv.0", "encoder.embed.conv.2", "encoder.embed.out.0"):
            expected |= {prefix + ".weight", prefix + ".bias"}
        for sub in ("self_attn.linear_q", "self_attn.linear_k", "self_attn.linear_v",
                    "self_attn.linear_out", "feed_forward.w_1", "feed_forward.w_2",
                    "feed_forward_macaron.w_1", "feed_forward_macaron.w_2",
                    "conv_module.pointwise_conv1", "conv_module.depthwise_conv",
                    "conv_module.norm", "conv_module.pointwise_conv2", "norm_ff", "norm_mha",
                    "norm_ff_macaron", "norm_conv", "norm_final"):
            expected |= {layer + sub + ".weight", layer + sub + ".bias"}
        self.assertEqual(names, expected)
        six = ConformerCtcModel(small_config(num_blocks=1, input_layer="conv2d6"))
        self.assertIn("encoder.embed.linear.weight", six.weights_state_dict())


class FrontendTest(unittest.TestCase):
    def test_cmvn_from_stats(self):
        feats = torch.randn(500, 80, dtype=torch.float64) * 3 + 2
        mean, istd = frontend.cmvn_from_stats(frontend.cmvn_stats(feats))
        self.assertTrue(torch.allclose(mean.double(), feats.mean(0), atol=1e-5))
        self.assertTrue(torch.allclose(istd.double(), 1 / feats.std(0, unbiased=False),
                                       rtol=1e-5))

    def test_fbank_shape(self):
        wav = frontend.synthetic_speech(1.0, 0)
        self.assertEqual(tuple(frontend.fbank(wav).shape), (98, 80))


class ModelDirTest(unittest.TestCase):
    def test_safetensors_round_trip(self):
        tensors = {"a": torch.randn(3, 4), "b": torch.randn(5).to(torch.bfloat16),
                   "c": torch.randn(2, 1, 3).to(torch.float16), "e": torch.zeros(0)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            safetensors_io.save(tensors, path, metadata={"x": 1})
            back = safetensors_io.load(path)
            with open(path, "rb") as f:
                header_len = int.from_bytes(f.read(8), "little")
            self.assertEqual(header_len % 8, 0)
        self.assertEqual(set(back), set(tensors))
        for k, v in tensors.items():
            self.assertEqual(back[k].dtype, v.dtype)
            self.assertTrue(torch.equal(back[k], v))

    def test_safetensors_parts(self):
        tensors = {"a": torch.randn(30), "b": torch.randn(4, 5).to(torch.float16)}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.safetensors")
            safetensors_io.save(tensors, path)
            with open(path, "rb") as f:
                data = f.read()
            os.remove(path)
            for i, (lo, hi) in enumerate([(0, 5), (5, 100), (100, len(data))]):
                with open(f"{path}.part{i:02d}", "wb") as f:
                    f.write(data[lo:hi])
            with open(path + ".sha256", "w", encoding="utf-8") as f:
                f.write(hashlib.sha256(data).hexdigest() + "\n")
            back = safetensors_io.load(path)
            self.assertTrue(torch.equal(back["b"], tensors["b"]))
            os.remove(path + ".part02")
            with self.assertRaisesRegex(ValueError, "sha256"):
                safetensors_io.load(path)

    def test_write_and_load_same_outputs(self):
        for dtype, as_json in (("float32", False), ("float16", True), ("bfloat16", False)):
            model = model_dir.round_weights_(
                randomize_(ConformerCtcModel(small_config(cnn_module_norm="batch_norm")), 4),
                dtype)
            model.encoder.global_cmvn.mean.copy_(torch.randn(80))
            model.encoder.global_cmvn.istd.copy_(torch.rand(80) + 0.5)
            feats = random_feats(120)
            with tempfile.TemporaryDirectory() as tmp:
                model_dir.write_model_dir(model, tmp, dtype=dtype, cmvn_as_json=as_json)
                back = model_dir.load_model_dir(tmp)
                with open(os.path.join(tmp, "units.txt"), encoding="utf-8") as f:
                    self.assertEqual(len(f.readlines()), 23)
            with torch.no_grad():
                diff = (model.log_probs_full(feats, 8) - back.log_probs_full(feats, 8)).abs().max()
            self.assertLess(diff.item(), 1e-4, dtype)


if __name__ == "__main__":
    unittest.main()
