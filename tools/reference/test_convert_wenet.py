"""Tests of tools/convert_wenet.py on checkpoints the reference writes in
WeNet's layout (run with /usr/bin/python3 -m unittest)."""

import contextlib
import io
import os
import tempfile
import unittest

import torch
import yaml

from tools import convert_wenet
from . import frontend, model_dir
from .model import ConformerCtcModel, ModelConfig, randomize_


def make_checkpoint(tmp, norm="layer_norm", **kw):
    cfg = ModelConfig(output_dim=19, output_size=32, attention_heads=2, linear_units=64,
                      num_blocks=2, cnn_module_kernel=5, cnn_module_norm=norm)
    model = randomize_(ConformerCtcModel(cfg), seed=11)
    feats = torch.randn(400, 80) * 2 + 1
    stats = frontend.cmvn_stats(feats)
    mean, istd = frontend.cmvn_from_stats(stats)
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    model_dir.write_wenet_checkpoint(model, tmp, stats, **kw)
    return model


class ConvertTest(unittest.TestCase):
    def run_convert(self, src, out, *extra, cmvn=True):
        args = ["--checkpoint", os.path.join(src, "final.pt"),
                "--config", os.path.join(src, "train.yaml"),
                "--units", os.path.join(src, "units.txt"), "--output", out, *extra]
        if cmvn:
            args += ["--cmvn", os.path.join(src, "global_cmvn")]
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = convert_wenet.main(args)
        return rc, err.getvalue()

    def test_converts_both_norms_and_matches(self):
        for norm, kw, dtype in (("layer_norm", {}, "float32"),
                                ("batch_norm", {"module_prefix": True}, "float16"),
                                ("batch_norm", {"with_cmvn_in_state": False}, "bfloat16")):
            with tempfile.TemporaryDirectory() as tmp:
                src, out = os.path.join(tmp, "wenet"), os.path.join(tmp, "oasr")
                model = make_checkpoint(src, norm, **kw)
                rc, err = self.run_convert(src, out, "--dtype", dtype, "--chunk-size", "8")
                self.assertEqual(rc, 0, err)
                back = model_dir.load_model_dir(out)
                feats = torch.randn(1, 150, 80)
                with torch.no_grad():
                    diff = (model.log_probs_full(feats, 8) - back.log_probs_full(feats, 8))
                tol = 1e-4 if dtype == "float32" else 0.2
                self.assertLess(diff.abs().max().item(), tol, (norm, dtype))
                self.assertNotIn("encoder.embed.pos_enc.pe", back.state_dict())

    def expect_error(self, mutate, needle, cmvn=True):
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "wenet"), os.path.join(tmp, "oasr")
            make_checkpoint(src)
            mutate(src)
            rc, err = self.run_convert(src, out, cmvn=cmvn)
            self.assertEqual(rc, 1)
            self.assertIn(needle, err)
            self.assertFalse(os.path.exists(os.path.join(out, "model.safetensors")))

    @staticmethod
    def edit_state(fn):
        def mutate(src):
            path = os.path.join(src, "final.pt")
            state = torch.load(path)
            fn(state)
            torch.save(state, path)
        return mutate

    @staticmethod
    def edit_yaml(fn):
        def mutate(src):
            path = os.path.join(src, "train.yaml")
            with open(path, encoding="utf-8") as f:
                train = yaml.safe_load(f)
            fn(train)
            with open(path, "w", encoding="utf-8") as f:
                yaml.safe_dump(train, f)
        return mutate

    def test_missing_tensor(self):
        name = "encoder.encoders.1.self_attn.linear_pos.weight"
        self.expect_error(self.edit_state(lambda s: s.pop(name)), name)

    def test_misshapen_tensor(self):
        name = "encoder.encoders.0.conv_module.depthwise_conv.weight"
        self.expect_error(self.edit_state(lambda s: s.__setitem__(name, torch.zeros(32, 1, 7))),
                          name)

    def test_unexpected_tensor(self):
        name = "encoder.encoders.0.self_attn.lora_a"
        self.expect_error(self.edit_state(lambda s: s.__setitem__(name, torch.zeros(2))), name)

    def test_unsupported_options(self):
        for key, value in (("causal", False), ("pos_enc_layer_type", "abs_pos"),
                           ("cnn_module_norm", "group_norm"), ("layer_norm_type", "rms_norm")):
            self.expect_error(
                self.edit_yaml(lambda t, k=key, v=value: t["encoder_conf"].__setitem__(k, v)),
                f"encoder_conf.{key}")

    def test_missing_field(self):
        self.expect_error(self.edit_yaml(lambda t: t["encoder_conf"].pop("cnn_module_kernel")),
                          "encoder_conf.cnn_module_kernel")

    def test_wrong_vocabulary_size(self):
        def drop_unit(src):
            path = os.path.join(src, "units.txt")
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(lines[:-1])
        self.expect_error(drop_unit, "output_dim is 19")

    def test_no_cmvn_anywhere(self):
        def strip(src):
            self.edit_state(lambda s: [s.pop(k) for k in list(s) if "global_cmvn" in k])(src)
        self.expect_error(strip, "no global CMVN", cmvn=False)


if __name__ == "__main__":
    unittest.main()
