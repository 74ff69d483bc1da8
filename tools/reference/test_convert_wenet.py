"""Tests of tools/convert_wenet.py on the three inputs WeNet users arrive with,
written by tools/reference/wenet_layout.py with random weights: a v2 and a v3
training experiment (final.pt + train.yaml with WeNet's recipe keys, so
defaults are omitted) and a TorchScript runtime model (final.zip). Run with
/usr/bin/python3 -m unittest."""

import contextlib
import io
import json
import os
import shutil
import tempfile
import unittest

import torch
import yaml
from torch import nn

from tools import convert_wenet
from . import decoder as dec
from . import frontend, model_dir, wenet_layout
from .model import ConformerCtcModel, ModelConfig, randomize_


def make_models(norm="layer_norm", input_layer="conv2d", kind="bitransformer", seed=11,
                static_chunk_size=0):
    cfg = ModelConfig(output_dim=19, output_size=32, attention_heads=2, linear_units=64,
                      num_blocks=2, cnn_module_kernel=5, cnn_module_norm=norm,
                      input_layer=input_layer, static_chunk_size=static_chunk_size)
    model = randomize_(ConformerCtcModel(cfg), seed=seed)
    feats = torch.randn(400, 80) * 2 + 1
    stats = frontend.cmvn_stats(feats)
    mean, istd = frontend.cmvn_from_stats(stats)
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    dcfg = dec.DecoderConfig(kind, 4, 40, 2, 1 if kind == "bitransformer" else 0)
    decoder = randomize_(dec.build_decoder(dcfg, cfg.output_dim, cfg.output_size), seed + 1)
    return model, decoder, dcfg, stats


def make_experiment(tmp, layout="v2", norm="layer_norm", input_layer="conv2d",
                    kind="bitransformer", **kw):
    shutil.rmtree(tmp, ignore_errors=True)
    model, decoder, dcfg, stats = make_models(norm, input_layer, kind)
    wenet_layout.write_experiment(model, decoder, dcfg, tmp, stats, layout=layout, **kw)
    return model, decoder, dcfg


def run(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = convert_wenet.main(args)
    return rc, err.getvalue()


class ConvertTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.src = os.path.join(self._tmp.name, "wenet")
        self.out = os.path.join(self._tmp.name, "oasr")

    def tearDown(self):
        self._tmp.cleanup()

    def convert(self, *extra, config=True):
        args = ["--checkpoint", os.path.join(self.src, "final.pt"), "--output", self.out]
        if config:
            args += ["--config", os.path.join(self.src, "train.yaml")]
        return run(args + list(extra))

    def assert_same_model(self, model, tol=1e-4):
        back = model_dir.load_model_dir(self.out)
        feats = torch.randn(1, 150, 80)
        with torch.no_grad():
            diff = model.log_probs_full(feats, 8) - back.log_probs_full(feats, 8)
        self.assertLess(diff.abs().max().item(), tol)
        return back

    def assert_same_decoder(self, decoder, dcfg, sos):
        back = model_dir.load_decoder(self.out)
        self.assertIsNotNone(back)
        self.assertEqual(back.cfg, dcfg)
        self.assertEqual((back.sos, back.eos), (sos, sos))
        ref = decoder.state_dict()
        for name, t in back.module.state_dict().items():
            self.assertTrue(torch.equal(t, ref[name]), name)
        return back

    def config_json(self):
        with open(os.path.join(self.out, "config.json"), encoding="utf-8") as f:
            return json.load(f)

    def expect_error(self, needle, *extra, config=True):
        shutil.rmtree(self.out, ignore_errors=True)
        rc, err = self.convert(*extra, config=config)
        self.assertEqual(rc, 1, err)
        self.assertIn(needle, err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "model.safetensors")))
        return err

    def edit_yaml(self, fn):
        path = os.path.join(self.src, "train.yaml")
        with open(path, encoding="utf-8") as f:
            train = yaml.safe_load(f)
        fn(train)
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(train, f)

    def edit_state(self, fn):
        path = os.path.join(self.src, "final.pt")
        state = torch.load(path)
        fn(state)
        torch.save(state, path)


class CheckpointTest(ConvertTest):
    def test_v2_recipe_layout(self):
        model, decoder, dcfg = make_experiment(self.src, "v2", module_prefix=True)
        with open(os.path.join(self.src, "train.yaml"), encoding="utf-8") as f:
            conf = yaml.safe_load(f)["encoder_conf"]
        self.assertNotIn("macaron_style", conf)  # as in WeNet's AISHELL U2++ recipe
        self.assertNotIn("static_chunk_size", conf)
        rc, err = self.convert(config=False)  # train.yaml beside final.pt, files beside it
        self.assertEqual(rc, 0, err)
        self.assert_same_model(model)
        self.assert_same_decoder(decoder, dcfg, 18)
        enc = self.config_json()["encoder_conf"]
        self.assertEqual((enc["macaron_style"], enc["static_chunk_size"]), (True, 0))
        self.assertEqual(self.config_json()["serving"], {"chunk_size": 16, "num_left_chunks": -1})
        with open(os.path.join(self.out, "decoder.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["rescoring"],
                             {"ctc_weight": 0.5, "reverse_weight": 0.0, "rescoring_weight": 1.0})

    def test_v3_layout_with_relative_paths_and_special_tokens(self):
        model, decoder, dcfg = make_experiment(self.src, "v3", sos=2, tokenizer="bpe")
        # The CMVN and units are only at the yaml-relative paths v3 names.
        self.assertFalse(os.path.exists(os.path.join(self.src, "units.txt")))
        rc, err = self.convert("--reverse-weight", "0.5", "--ctc-weight", "0.3")
        self.assertEqual(rc, 0, err)
        self.assert_same_model(model)
        back = self.assert_same_decoder(decoder, dcfg, 2)
        self.assertEqual(back.rescoring, model_dir.Rescoring(0.3, 0.5, 1.0))
        self.assertTrue(os.path.exists(os.path.join(self.out, "bpe.model")))
        self.assertNotIn("encoder.embed.pos_enc.pe", back.module.state_dict())

    def test_norms_dtypes_and_cmvn_sources(self):
        for layout, norm, kw, dtype in (
                ("v2", "batch_norm", {"with_cmvn_in_state": False}, "float16"),
                ("v3", "batch_norm", {"with_cmvn_in_state": False, "cmvn_kaldi": True},
                 "bfloat16"),
                ("v3", "layer_norm", {"cmvn_kaldi": True}, "float32")):
            shutil.rmtree(self.src, ignore_errors=True)
            model, _, _ = make_experiment(self.src, layout, norm, **kw)
            rc, err = self.convert("--dtype", dtype, "--chunk-size", "8", "--no-decoder")
            self.assertEqual(rc, 0, (layout, norm, err))
            self.assert_same_model(model, 1e-4 if dtype == "float32" else 0.2)
            self.assertIsNone(model_dir.load_decoder(self.out))
            self.assertFalse(os.path.exists(os.path.join(self.out, "decoder.json")))

    def test_conv2d6_and_conv2d8(self):
        for layer in ("conv2d6", "conv2d8"):
            shutil.rmtree(self.src, ignore_errors=True)
            model, decoder, dcfg = make_experiment(self.src, "v3", "batch_norm", layer,
                                                   kind="transformer")
            rc, err = self.convert()
            self.assertEqual(rc, 0, (layer, err))
            self.assertEqual(self.config_json()["encoder_conf"]["input_layer"], layer)
            self.assert_same_model(model)
            self.assert_same_decoder(decoder, dcfg, 18)

    def test_wenet_defaults_fill_absent_fields(self):
        # Each expected value is WeNet's keyword default (v2.2.1 and v3.1.0).
        model, _, _ = make_experiment(self.src, "v2", norm="batch_norm")
        self.edit_yaml(lambda t: [t["encoder_conf"].pop(k) for k in
                                  ("cnn_module_norm", "pos_enc_layer_type", "activation_type",
                                   "selfattention_layer_type", "use_cnn_module",
                                   "normalize_before", "input_layer")])
        self.edit_yaml(lambda t: t.pop("encoder"))
        rc, err = self.convert("--no-decoder")
        self.assertEqual(rc, 0, err)
        enc = self.config_json()["encoder_conf"]
        self.assertEqual((enc["cnn_module_norm"], enc["input_layer"], enc["pos_enc_layer_type"]),
                         ("batch_norm", "conv2d", "rel_pos"))
        self.assert_same_model(model)
        # num_blocks 6, cnn_module_kernel 15, causal False, use_dynamic_chunk False:
        for key, needle in (("num_blocks", "missing tensor 'encoder.encoders.2."),
                            ("cnn_module_kernel", "[32, 1, 15]"),
                            ("causal", "encoder_conf.causal=False (WeNet's default; the field "
                                       "is absent)")):
            make_experiment(self.src, "v2")
            self.edit_yaml(lambda t, k=key: t["encoder_conf"].pop(k))
            self.expect_error(needle)
        make_experiment(self.src, "v2")
        self.edit_yaml(lambda t: t["encoder_conf"].pop("use_dynamic_chunk"))
        self.expect_error("encoder_conf.static_chunk_size=0 (WeNet's default; the field is "
                          "absent) with use_dynamic_chunk=False (WeNet's default")

    def test_decoder_defaults(self):
        # decoder absent -> bitransformer; decoder_conf.num_blocks absent -> 6.
        model, decoder, dcfg = make_experiment(self.src, "v2")
        self.edit_yaml(lambda t: t.pop("decoder"))
        self.assertEqual(self.convert()[0], 0)
        self.edit_yaml(lambda t: t["decoder_conf"].pop("num_blocks"))
        self.expect_error("missing tensor 'decoder.left_decoder.decoders.2.")
        # A CTC-only training (ctc_weight 1) never trained the decoder: left out.
        self.edit_yaml(lambda t: t["model_conf"].__setitem__("ctc_weight", 1.0))
        rc, err = self.convert()
        self.assertEqual(rc, 0, err)
        self.assertIn("the attention decoder was not trained", err)
        self.assertIsNone(model_dir.load_decoder(self.out))

    def test_static_chunk_size_is_the_default_serving_chunk(self):
        model, decoder, dcfg, stats = make_models(static_chunk_size=8)
        wenet_layout.write_experiment(model, decoder, dcfg, self.src, stats)
        self.assertEqual(self.convert()[0], 0)
        self.assertEqual(self.config_json()["serving"]["chunk_size"], 8)
        self.assertEqual(self.config_json()["encoder_conf"]["static_chunk_size"], 8)

    def test_refused_options_are_named(self):
        cases = [
            ("encoder", "transformer", "unsupported option encoder=transformer"),
            ("encoder", "squeezeformer", "unsupported option encoder=squeezeformer"),
            ("encoder_conf.causal", False, "encoder_conf.causal=False (a non-causal"),
            ("encoder_conf.pos_enc_layer_type", "rope_pos",
             "encoder_conf.pos_enc_layer_type=rope_pos (rotary positions)"),
            ("encoder_conf.selfattention_layer_type", "shaw_rel_selfattn",
             "encoder_conf.selfattention_layer_type=shaw_rel_selfattn (Shaw"),
            ("encoder_conf.n_kv_head", 1, "encoder_conf.n_kv_head=1 (grouped KV heads"),
            ("encoder_conf.activation_type", "relu", "encoder_conf.activation_type=relu"),
            ("encoder_conf.mlp_type", "gated", "encoder_conf.mlp_type=gated (a gated MLP)"),
            ("encoder_conf.layer_norm_type", "rms_norm", "encoder_conf.layer_norm_type=rms_norm"),
            ("encoder_conf.norm_eps", "1e-6", "encoder_conf.norm_eps=1e-6"),
            ("encoder_conf.conv_bias", False, "encoder_conf.conv_bias=False"),
            ("encoder_conf.cnn_module_norm", "group_norm", "encoder_conf.cnn_module_norm"),
            ("encoder_conf.input_layer", "conv2d2", "encoder_conf.input_layer=conv2d2"),
            ("encoder_conf.lora_rank", 8, "unknown option encoder_conf.lora_rank=8"),
            ("predictor", "rnn", "unsupported option predictor (a transducer"),
            ("input_dim", 40, "input_dim=40"),
            ("dataset_conf.fbank_conf.frame_shift", 12,
             "dataset_conf.fbank_conf.frame_shift=12"),
            ("decoder", "sanm_decoder", "decoder=sanm_decoder"),
            ("decoder_conf.activation_type", "gelu", "decoder_conf.activation_type=gelu"),
        ]
        for path, value, needle in cases:
            make_experiment(self.src, "v2")

            def put(t, path=path, value=value):
                *parents, key = path.split(".")
                for p in parents:
                    t = t.setdefault(p, {})
                t[key] = value
            self.edit_yaml(put)
            self.expect_error(needle)
        for path, value, needle in (("model", "transducer", "model=transducer"),
                                    ("tokenizer", "whisper", "tokenizer=whisper"),
                                    ("ctc_conf.ctc_blank_id", 3, "ctc_conf.ctc_blank_id=3")):
            make_experiment(self.src, "v3")
            *parents, key = path.split(".")
            self.edit_yaml(lambda t, p=parents, k=key, v=value:
                           (t[p[0]] if p else t).__setitem__(k, v))
            self.expect_error(needle)

    def test_decoder_problems_point_at_no_decoder(self):
        make_experiment(self.src, "v2")
        self.edit_yaml(lambda t: t["decoder_conf"].__setitem__("activation_type", "gelu"))
        err = self.expect_error("decoder_conf.activation_type=gelu")
        self.assertIn("--no-decoder", err)
        self.assertEqual(self.convert("--no-decoder")[0], 0)
        make_experiment(self.src, "v2", kind="transformer")
        self.expect_error("--reverse-weight 0.5 needs a bitransformer", "--reverse-weight", "0.5")
        make_experiment(self.src, "v3", train_reverse_weight=0.0)
        self.expect_error("the right-to-left decoder was not trained", "--reverse-weight", "0.3")
        self.expect_error("--reverse-weight 1.5 is outside [0, 1]", "--reverse-weight", "1.5")

    def test_tied_output_layer(self):
        model, decoder, dcfg = make_experiment(self.src, "v3", kind="transformer")
        self.edit_state(lambda s: s.pop("decoder.output_layer.weight"))
        self.expect_error("missing tensor 'decoder.output_layer.weight'")
        self.edit_yaml(lambda t: t["decoder_conf"].__setitem__("tie_word_embedding", True))
        self.assertEqual(self.convert()[0], 0)
        back = model_dir.load_decoder(self.out)
        self.assertTrue(torch.equal(back.module.output_layer.weight, decoder.embed[0].weight))

    def test_checkpoint_tensor_errors(self):
        for fn, needle in (
                (lambda s: s.pop("encoder.encoders.1.self_attn.linear_pos.weight"),
                 "missing tensor 'encoder.encoders.1.self_attn.linear_pos.weight'"),
                (lambda s: s.__setitem__("encoder.encoders.0.conv_module.depthwise_conv.weight",
                                         torch.zeros(32, 1, 7)),
                 "'encoder.encoders.0.conv_module.depthwise_conv.weight' has shape [32, 1, 7]"),
                (lambda s: s.__setitem__("encoder.encoders.0.self_attn.lora_a", torch.zeros(2)),
                 "unexpected tensor 'encoder.encoders.0.self_attn.lora_a'"),
                (lambda s: s.pop("decoder.right_decoder.decoders.0.norm2.bias"),
                 "missing tensor 'decoder.right_decoder.decoders.0.norm2.bias'")):
            make_experiment(self.src, "v2")
            self.edit_state(fn)
            self.expect_error(needle)

    def test_cmvn_and_units_sources(self):
        model, _, _ = make_experiment(self.src, "v2", with_cmvn_in_state=False)
        os.remove(os.path.join(self.src, "global_cmvn"))
        self.expect_error("train.yaml: cmvn_file=data/train/global_cmvn: no cmvn file at")
        # A v2 recipe conf without cmvn_file says nothing: --cmvn is needed.
        self.edit_yaml(lambda t: t.pop("cmvn_file"))
        self.expect_error("no global CMVN")
        # cmvn_file: null means trained without CMVN: the identity.
        self.edit_yaml(lambda t: t.__setitem__("cmvn_file", None))
        self.assertEqual(self.convert("--no-decoder")[0], 0)
        back = model_dir.load_model_dir(self.out)
        self.assertTrue(torch.equal(back.encoder.global_cmvn.istd, torch.ones(80)))
        # A --cmvn that disagrees with the checkpoint's buffers.
        make_experiment(self.src, "v2")
        other = os.path.join(self._tmp.name, "other_cmvn")
        with open(other, "w", encoding="utf-8") as f:
            json.dump(frontend.cmvn_stats(torch.randn(50, 80)), f)
        self.expect_error("disagrees with the checkpoint's encoder.global_cmvn.mean",
                          "--cmvn", other)
        # Units: v3's symbol table missing, then given by flag.
        make_experiment(self.src, "v3")
        units = os.path.join(self.src, "data", "dict", "lang_char.txt")
        moved = os.path.join(self._tmp.name, "units.txt")
        shutil.move(units, moved)
        self.expect_error("tokenizer_conf.symbol_table_path=data/dict/lang_char.txt: no units")
        self.assertEqual(self.convert("--units", moved)[0], 0)
        with open(moved, "a", encoding="utf-8") as f:
            f.write("extra 19\n")
        self.expect_error("20 units but output_dim is 19", "--units", moved)

    def test_layouts_must_not_mix(self):
        make_experiment(self.src, "v3")
        self.edit_yaml(lambda t: t.__setitem__("cmvn_file", "x"))
        self.expect_error("mixes the v2 layout (cmvn_file) and the v3 layout")

    def test_output_dim_from_the_ctc_layer(self):
        model, _, _ = make_experiment(self.src, "v3")
        self.edit_yaml(lambda t: [t.pop("output_dim"), t.pop("input_dim")])
        self.assertEqual(self.convert()[0], 0)  # input_dim from fbank_conf.num_mel_bins
        self.assertEqual(self.config_json()["output_dim"], 19)


class TorchScriptTest(ConvertTest):
    def write(self, norm="layer_norm", layer="conv2d", kind="bitransformer", **kw):
        model, decoder, dcfg, _ = make_models(norm, layer, kind)
        path = wenet_layout.write_runtime(model, decoder, self.src, **kw)
        return model, decoder, dcfg, path

    def convert_zip(self, *extra):
        return run(["--torchscript", os.path.join(self.src, "final.zip"), "--output", self.out,
                    *extra])

    def test_converts_without_train_yaml(self):
        for norm, layer, kind, kw in (
                ("layer_norm", "conv2d", "bitransformer", {"reverse_weight": 0.3}),
                ("batch_norm", "conv2d6", "transformer", {"static_chunk_size": 4,
                                                          "use_dynamic_chunk": False}),
                ("layer_norm", "conv2d8", "transformer", {"pe_buffers": False})):
            shutil.rmtree(self.src, ignore_errors=True)
            model, decoder, dcfg, _ = self.write(norm, layer, kind, **kw)
            extra = ["--reverse-weight", "0.5"] if kind == "bitransformer" else []
            rc, err = self.convert_zip(*extra)
            self.assertEqual(rc, 0, (layer, err))
            self.assert_same_model(model)
            self.assert_same_decoder(decoder, dcfg, 18)
            conf = self.config_json()
            self.assertEqual((conf["encoder_conf"]["input_layer"],
                              conf["encoder_conf"]["cnn_module_norm"],
                              conf["encoder_conf"]["attention_heads"],
                              conf["encoder_conf"]["cnn_module_kernel"]), (layer, norm, 2, 5))
            self.assertEqual(conf["serving"]["chunk_size"], kw.get("static_chunk_size", 16))

    def test_runtime_export_agrees_with_the_reference(self):
        # The fixture is a working model: its exported methods give what the
        # reference (and so the converted model) computes.
        model, decoder, dcfg, path = self.write(reverse_weight=0.3)
        m = torch.jit.load(path)
        feats = torch.randn(1, 67, 80)
        y, att, cnn = m.forward_encoder_chunk(feats, 0, -1, torch.zeros(0, 0, 0, 0),
                                              torch.zeros(0, 0, 0, 0))
        with torch.no_grad():
            ref = model.encoder.forward_full(feats, 16)
        self.assertLess((y - ref).abs().max().item(), 1e-5)
        hyps = [[3, 4, 5], [7], []]
        ys, lens = dec.pad_hyps(hyps, 18, 18)
        left, right = m.forward_attention_decoder(ys, lens, y, 0.5)
        r = dec.attention_rescoring(decoder, y[0], hyps, [0.0] * 3, 18, 18, 0.0, 0.5)
        for i, h in enumerate(hyps):
            score = 0.5 * dec.sequence_score(left[i], h, 18) + \
                0.5 * dec.sequence_score(right[i], h[::-1], 18)
            self.assertAlmostEqual(score, r.scores[i], places=4)
        self.assertEqual((m.subsampling_rate(), m.right_context(), m.sos_symbol()), (4, 6, 18))
        self.assertTrue(m.is_bidirectional_decoder())

    def test_no_cmvn_buffers_is_the_identity(self):
        # WeNet's encoder of a model trained without CMVN has no global_cmvn.
        model, _, _, _ = self.write(kind="transformer",
                                    prepare=lambda rt: setattr(rt.encoder, "global_cmvn",
                                                               nn.Identity()))
        rc, err = self.convert_zip("--no-decoder")
        self.assertEqual(rc, 0, err)
        self.assertIn("trained without global CMVN", err)
        model.encoder.global_cmvn.mean.zero_()
        model.encoder.global_cmvn.istd.fill_(1.0)
        self.assert_same_model(model)

    def test_refusals_name_the_option(self):
        def noncausal(rt):
            rt.encoder.encoders[1].conv_module.lorder = 0

        def relu(rt):
            rt.encoder.encoders[0].feed_forward.activation = nn.ReLU()

        def gelu_decoder(rt):
            rt.decoder.left_decoder.decoders[0].feed_forward.activation = nn.GELU()

        def full_context(rt):
            rt.encoder.use_dynamic_chunk = False

        def transformer(rt):
            rt.encoder.__class__ = type("TransformerEncoder", (type(rt.encoder),), {})
        for prepare, needle in (
                (transformer, "the encoder is a TransformerEncoder"),
                (noncausal, "encoder.encoders.1.conv_module.lorder=0 (causal=False"),
                (relu, "encoder.encoders.0.feed_forward.activation is ReLU (activation_type"),
                (gelu_decoder, "decoder activation_type other than relu"),
                (full_context, "static_chunk_size=0 with use_dynamic_chunk=False")):
            shutil.rmtree(self.src, ignore_errors=True)
            self.write(prepare=prepare)
            rc, err = self.convert_zip()
            self.assertEqual(rc, 1, err)
            self.assertIn(needle, err)
        self.assertEqual(self.convert_zip("--no-decoder")[0], 1)  # still full context
        shutil.rmtree(self.src, ignore_errors=True)
        self.write(prepare=gelu_decoder)
        self.assertEqual(self.convert_zip("--no-decoder")[0], 0)

    def test_not_a_wenet_runtime_model(self):
        os.makedirs(self.src)
        torch.jit.script(nn.Linear(2, 2)).save(os.path.join(self.src, "final.zip"))
        model_dir.write_units(model_dir.default_units(19), os.path.join(self.src, "units.txt"))
        rc, err = self.convert_zip()
        self.assertEqual(rc, 1)
        self.assertIn("no method subsampling_rate()", err)
        with open(os.path.join(self.src, "final.zip"), "wb") as f:
            f.write(b"not a zip")
        rc, err = self.convert_zip()
        self.assertEqual(rc, 1)
        self.assertIn("not a TorchScript model", err)


if __name__ == "__main__":
    unittest.main()
