"""Tests of the reference attention decoder and attention rescoring
(tools/reference/decoder.py; run with /usr/bin/python3 -m unittest)."""

import json
import math
import os
import tempfile
import unittest

import numpy as np
import torch
from torch import nn

from . import decoder as dec
from . import make_fixtures, model_dir, safetensors_io
from .model import ConformerCtcModel, ModelConfig, position_table, randomize_

D, HEADS, UNITS, VOCAB = 32, 4, 48, 23
SOS = EOS = VOCAB - 1


def make(kind="bitransformer", blocks=2, r_blocks=2, seed=5):
    cfg = dec.DecoderConfig(kind, HEADS, UNITS, blocks, r_blocks if kind == "bitransformer" else 0)
    return randomize_(dec.build_decoder(cfg, VOCAB, D), seed), cfg


def torch_layers(tdec: dec.TransformerDecoder):
    """The same layers as torch.nn.TransformerDecoderLayer (an independent
    implementation of pre-norm self-attention, cross-attention and FFN)."""
    out = []
    for layer in tdec.decoders:
        t = nn.TransformerDecoderLayer(D, HEADS, UNITS, dropout=0.0, activation="relu",
                                       layer_norm_eps=1e-5, batch_first=True, norm_first=True)
        with torch.no_grad():
            pairs = ((t.self_attn, layer.self_attn), (t.multihead_attn, layer.src_attn))
            for theirs, ours in pairs:
                theirs.in_proj_weight.copy_(torch.cat([ours.linear_q.weight, ours.linear_k.weight,
                                                       ours.linear_v.weight]))
                theirs.in_proj_bias.copy_(torch.cat([ours.linear_q.bias, ours.linear_k.bias,
                                                     ours.linear_v.bias]))
                theirs.out_proj.weight.copy_(ours.linear_out.weight)
                theirs.out_proj.bias.copy_(ours.linear_out.bias)
            t.linear1.load_state_dict(layer.feed_forward.w_1.state_dict())
            t.linear2.load_state_dict(layer.feed_forward.w_2.state_dict())
            for i in (1, 2, 3):
                getattr(t, f"norm{i}").load_state_dict(getattr(layer, f"norm{i}").state_dict())
        out.append(t.eval())
    return out


class DecoderTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.memory = torch.randn(17, D)

    def test_matches_torch_transformer_decoder_layers(self):
        model, _ = make("transformer", blocks=3)
        tokens = torch.tensor([[SOS, 3, 9, 4, 4, 1]])
        with torch.no_grad():
            ours = model(self.memory.unsqueeze(0), None, tokens, torch.tensor([6]))
            x = model.embed[0](tokens) * math.sqrt(D) + position_table(0, 6, D)
            causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
            for t in torch_layers(model):
                x = t(x, self.memory.unsqueeze(0), tgt_mask=causal)
            theirs = model.output_layer(model.after_norm(x))
        self.assertLess((ours - theirs).abs().max().item(), 1e-4)

    def test_batched_and_padded_equals_one_at_a_time(self):
        model, _ = make()
        left, right = dec.directions(model)
        hyps = [[5, 6, 7, 8, 9], [3], [], [4, 4, 2]]
        for direction, reverse in ((left, False), (right, True)):
            batch = dec.decoder_log_probs(direction, self.memory, hyps, SOS, EOS, reverse)
            for i, h in enumerate(hyps):
                one = dec.decoder_log_probs(direction, self.memory, [h], SOS, EOS, reverse)[0]
                n = len(h) + 1
                self.assertLess((batch[i, :n] - one[:n]).abs().max().item(), 1e-5, (h, reverse))

    def test_is_causal_and_reads_the_encoder(self):
        model, _ = make("transformer")
        a = dec.decoder_log_probs(model, self.memory, [[5, 6, 7, 8]], SOS, EOS)[0]
        b = dec.decoder_log_probs(model, self.memory, [[5, 6, 1, 2]], SOS, EOS)[0]
        self.assertLess((a[:3] - b[:3]).abs().max().item(), 1e-6)  # sos, 5, 6 see the same
        self.assertGreater((a[3:] - b[3:]).abs().max().item(), 1e-3)
        c = dec.decoder_log_probs(model, self.memory * 2, [[5, 6, 7, 8]], SOS, EOS)[0]
        self.assertGreater((a - c).abs().max().item(), 1e-3)

    def test_rescoring_combines_scores_as_wenet(self):
        model, _ = make(seed=9)
        hyps = [[5, 6, 7], [5, 7], [2, 8, 8, 3], []]
        ctc = [-3.0, -2.5, -6.0, -9.0]
        left, right = dec.directions(model)

        def one_score(direction, tokens):
            # Straight from the definition, one unpadded sequence at a time.
            ys = torch.tensor([[SOS] + tokens])
            with torch.no_grad():
                lp = torch.log_softmax(direction(self.memory.unsqueeze(0), None, ys,
                                                 torch.tensor([len(tokens) + 1])), -1)[0]
            return sum(lp[j, w].item() for j, w in enumerate(tokens)) + lp[len(tokens), EOS].item()

        for ctc_weight, reverse_weight, rescoring_weight in ((0.5, 0.0, 1.0), (0.3, 0.5, 1.0),
                                                             (2.0, 1.0, 0.5)):
            r = dec.attention_rescoring(model, self.memory, hyps, ctc, SOS, EOS, ctc_weight,
                                        reverse_weight, rescoring_weight)
            for i, h in enumerate(hyps):
                l2r = one_score(left, h)
                r2l = one_score(right, h[::-1])
                d = l2r
                if reverse_weight > 0:
                    d = (1 - reverse_weight) * l2r + reverse_weight * r2l
                self.assertAlmostEqual(r.left_scores[i], l2r, places=4)
                if reverse_weight > 0:
                    self.assertAlmostEqual(r.right_scores[i], r2l, places=4)
                self.assertAlmostEqual(r.scores[i], rescoring_weight * d + ctc_weight * ctc[i],
                                       places=4)
            self.assertEqual(r.best, max(range(len(hyps)), key=lambda i: r.scores[i]))

    def test_the_right_decoder_reads_the_reversed_hypothesis(self):
        model, _ = make(seed=3)
        hyps = [[4, 9, 11, 2]]
        r = dec.attention_rescoring(model, self.memory, hyps, [0.0], SOS, EOS, 0.0, 1.0)
        _, right = dec.directions(model)
        forward_order = dec.decoder_log_probs(right, self.memory, hyps, SOS, EOS)[0]
        self.assertAlmostEqual(r.scores[0], dec.sequence_score(
            dec.decoder_log_probs(right, self.memory, hyps, SOS, EOS, reverse=True)[0],
            hyps[0][::-1], EOS), places=5)
        self.assertNotAlmostEqual(r.scores[0], dec.sequence_score(forward_order, hyps[0], EOS),
                                  places=3)

    def test_ctc_weight_can_change_the_winner(self):
        model, _ = make(seed=4)
        hyps = [[5, 6, 7], [8, 9, 10]]
        base = dec.attention_rescoring(model, self.memory, hyps, [0.0, 0.0], SOS, EOS, 0.0)
        loser = 1 - base.best
        ctc = [0.0, 0.0]
        ctc[loser] = 1.0 + abs(base.scores[0] - base.scores[1])
        self.assertEqual(
            dec.attention_rescoring(model, self.memory, hyps, ctc, SOS, EOS, 1.0).best, loser)
        tie = dec.attention_rescoring(model, self.memory, [[5, 6], [5, 6]], [0.0, 0.0], SOS, EOS,
                                      0.5)
        self.assertEqual(tie.best, 0)

    def test_refusals(self):
        model, _ = make("transformer")
        with self.assertRaisesRegex(ValueError, "reverse_weight=0.3 needs a bitransformer"):
            dec.attention_rescoring(model, self.memory, [[1]], [0.0], SOS, EOS, 0.5, 0.3)
        with self.assertRaisesRegex(ValueError, "reverse_weight=1.5 is outside"):
            dec.attention_rescoring(model, self.memory, [[1]], [0.0], SOS, EOS, 0.5, 1.5)
        with self.assertRaisesRegex(ValueError, "2 hypotheses with 1 CTC scores"):
            dec.attention_rescoring(model, self.memory, [[1], [2]], [0.0], SOS, EOS, 0.5)
        for cfg, needle in ((dec.DecoderConfig("bitransformer", 4, 8, 2, 0), "r_num_blocks=0"),
                            (dec.DecoderConfig("transformer", 4, 8, 2, 3), "r_num_blocks=3"),
                            (dec.DecoderConfig("transformer", 5, 8, 2, 0), "attention_heads=5"),
                            (dec.DecoderConfig("rnn", 4, 8, 2, 0), "decoder=rnn")):
            with self.assertRaisesRegex(ValueError, needle):
                dec.build_decoder(cfg, VOCAB, D)

    def test_state_dict_names_are_wenets(self):
        uni, _ = make("transformer", blocks=1)
        names = set(uni.state_dict())
        layer = {f"decoders.0.{m}.{p}.{w}" for m in ("self_attn", "src_attn")
                 for p in ("linear_q", "linear_k", "linear_v", "linear_out")
                 for w in ("weight", "bias")}
        layer |= {f"decoders.0.feed_forward.w_{i}.{w}" for i in (1, 2) for w in ("weight", "bias")}
        layer |= {f"decoders.0.norm{i}.{w}" for i in (1, 2, 3) for w in ("weight", "bias")}
        top = {"embed.0.weight", "after_norm.weight", "after_norm.bias", "output_layer.weight",
               "output_layer.bias"}
        self.assertEqual(names, layer | top)
        bi, _ = make("bitransformer", blocks=1, r_blocks=1)
        self.assertEqual(set(bi.state_dict()),
                         {f"{side}_decoder.{n}" for side in ("left", "right") for n in layer | top})


class ModelDirTest(unittest.TestCase):
    """The attention decoder in a model directory (docs/model-format.md)."""

    def write(self, tmp, kind="bitransformer", rescoring=None):
        cfg = ModelConfig(output_dim=VOCAB, output_size=D, attention_heads=2, linear_units=40,
                          num_blocks=1, cnn_module_kernel=5)
        model = randomize_(ConformerCtcModel(cfg), 1)
        module, dcfg = make(kind)
        attached = model_dir.AttentionDecoder(dcfg, module, SOS, EOS,
                                              rescoring or model_dir.Rescoring())
        model_dir.write_model_dir(model, tmp, decoder=attached)
        return module, dcfg

    def test_round_trip_and_the_encoder_loader_ignores_it(self):
        for kind in ("transformer", "bitransformer"):
            with tempfile.TemporaryDirectory() as tmp:
                module, dcfg = self.write(tmp, kind, model_dir.Rescoring(0.3, 0.0, 1.0))
                back = model_dir.load_decoder(tmp)
                self.assertEqual((back.cfg, back.sos, back.eos), (dcfg, SOS, EOS))
                self.assertEqual(back.rescoring, model_dir.Rescoring(0.3, 0.0, 1.0))
                ref = module.state_dict()
                for name, t in back.module.state_dict().items():
                    self.assertTrue(torch.equal(t, ref[name]), name)
                names = safetensors_io.load(os.path.join(tmp, "model.safetensors"))
                self.assertIn("decoder." + next(iter(ref)), names)
                model_dir.load_model_dir(tmp)  # the encoder ignores decoder.*

    def test_problems_are_named(self):
        def edit_json(fn):
            def mutate(tmp):
                path = os.path.join(tmp, "decoder.json")
                with open(path, encoding="utf-8") as f:
                    conf = json.load(f)
                fn(conf)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(conf, f)
            return mutate

        def edit_tensors(fn):
            def mutate(tmp):
                path = os.path.join(tmp, "model.safetensors")
                tensors = safetensors_io.load(path)
                fn(tensors)
                safetensors_io.save(tensors, path)
            return mutate
        for mutate, needle in (
                (lambda tmp: os.remove(os.path.join(tmp, "decoder.json")),
                 "decoder.* tensors but no decoder.json"),
                (edit_json(lambda c: c.__setitem__("beam", 3)), "unknown option 'beam'"),
                (edit_json(lambda c: c["decoder_conf"].pop("r_num_blocks")),
                 "missing field 'decoder_conf.r_num_blocks'"),
                (edit_json(lambda c: c.__setitem__("sos", VOCAB)), f"sos={VOCAB} is outside"),
                (edit_json(lambda c: c["rescoring"].__setitem__("reverse_weight", 2.0)),
                 "rescoring.reverse_weight=2.0 is outside [0, 1]"),
                (edit_json(lambda c: c["decoder_conf"].__setitem__("num_blocks", 3)),
                 "missing tensor 'decoder.left_decoder.decoders.2."),
                (edit_tensors(lambda t: t.pop("decoder.right_decoder.output_layer.bias")),
                 "missing tensor 'decoder.right_decoder.output_layer.bias'"),
                (edit_tensors(lambda t: t.__setitem__("decoder.extra", torch.zeros(1))),
                 "unexpected tensor 'decoder.extra'")):
            with tempfile.TemporaryDirectory() as tmp:
                self.write(tmp)
                mutate(tmp)
                with self.assertRaises(ValueError) as ctx:
                    model_dir.load_decoder(tmp)
                self.assertIn(needle, str(ctx.exception))
        with tempfile.TemporaryDirectory() as tmp, self.assertRaisesRegex(
                ValueError, "reverse_weight=0.5 needs a bitransformer"):
            self.write(tmp, "transformer", model_dir.Rescoring(0.5, 0.5, 1.0))

    def test_rescoring_fixtures_are_consistent(self):
        # What the C++ rescoring will be checked against (make_fixtures).
        with tempfile.TemporaryDirectory() as tmp:
            for name in make_fixtures.RESCORING_CASES:
                entry = make_fixtures.write_rescoring_case(tmp, name, 7)
                self.assertGreater(len(entry["hyps"]), 1)
                loaded = model_dir.load_decoder(entry["model_dir"])
                left = np.load(entry["left_log_probs"])
                sos = loaded.sos
                for run in entry["runs"]:
                    for i, hyp in enumerate(entry["hyps"]):
                        l2r = dec.sequence_score(torch.from_numpy(left[i]), hyp, loaded.eos)
                        self.assertAlmostEqual(run["left_scores"][i], l2r, places=3)
                        d = l2r
                        if run["reverse_weight"] > 0:
                            right = np.load(entry["right_log_probs"])
                            r2l = dec.sequence_score(torch.from_numpy(right[i]), hyp[::-1],
                                                     loaded.eos)
                            self.assertAlmostEqual(run["right_scores"][i], r2l, places=3)
                            d = (1 - run["reverse_weight"]) * l2r + run["reverse_weight"] * r2l
                        self.assertAlmostEqual(
                            run["scores"][i], run["rescoring_weight"] * d +
                            run["ctc_weight"] * entry["ctc_scores"][i], places=3)
                    self.assertEqual(run["best"], int(np.argmax(run["scores"])))
                self.assertEqual(sos, 36)


if __name__ == "__main__":
    unittest.main()
