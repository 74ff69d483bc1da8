"""Writes golden fixtures for the C++ tests.

  /usr/bin/python3 -m tools.reference.make_fixtures --out DIR [--only NAMES]

For every encoder case: DIR/<case>/model (a model directory of a randomly
initialised model), feats.npy (raw fbank, float32 [T, 80]) and one
log-prob file per (chunk size, left chunks) run, listed in DIR/manifest.json
under "cases". Also DIR/fbank: speech (espeak-ng when installed, else a
synthetic signal), its 16 kHz float samples and torchaudio's Kaldi fbank.

For every rescoring case (manifest "rescoring": a U2 model with a transformer
decoder, U2++ models with bitransformer ones, over 4x, 6x and 8x subsampling): the model directory with its
attention decoder (decoder.json), feats.npy, encoder_out.npy (the encoder
output at the case's chunk size, float32 [T', d]), the CTC prefix beam
search n-best of its log-probs (tools/ctc_reference.py), every hypothesis's
decoder log-probs per direction (left_log_probs.npy / right_log_probs.npy,
float32 [N, 1 + longest, V], rows valid up to each hypothesis's eos
position) and the attention-rescoring scores and winner for several weights
(tools/reference/decoder.py).
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch
import torchaudio

from . import decoder as attention
from . import frontend, model_dir, wenet_layout
from .model import ConformerCtcModel, ModelConfig, randomize_

RUNS = [(4, -1), (8, -1), (16, -1), (4, 2), (8, 2), (16, 2)]

# name: (config, on-disk dtype, seconds of audio, runs, start offset)
CASES = {
    "small_ln": (ModelConfig(output_dim=53, output_size=96, attention_heads=4, linear_units=192,
                             num_blocks=3, cnn_module_kernel=15), "float32", 6.0, RUNS, 0),
    "small_bn": (ModelConfig(output_dim=37, output_size=64, attention_heads=2, linear_units=160,
                             num_blocks=2, cnn_module_kernel=8, cnn_module_norm="batch_norm"),
                 "float16", 6.0, RUNS, 0),
    "conformer_12x256": (ModelConfig(output_dim=300, output_size=256, attention_heads=4,
                                     linear_units=2048, num_blocks=12, cnn_module_kernel=15),
                         "bfloat16", 5.0, RUNS, 0),
    "conformer_12x256_bn": (ModelConfig(output_dim=211, output_size=256, attention_heads=4,
                                        linear_units=1024, num_blocks=12, cnn_module_kernel=15,
                                        cnn_module_norm="batch_norm"),
                            "float32", 3.0, [(8, -1), (16, 2)], 0),
    "sub6": (ModelConfig(output_dim=29, output_size=64, attention_heads=4, linear_units=128,
                         num_blocks=2, cnn_module_kernel=8, input_layer="conv2d6",
                         cnn_module_norm="batch_norm"), "float32", 4.0, [(8, -1), (4, 2)], 0),
    "sub8": (ModelConfig(output_dim=29, output_size=64, attention_heads=2, linear_units=128,
                         num_blocks=2, cnn_module_kernel=15, input_layer="conv2d8"),
             "float32", 4.0, [(8, -1), (4, 2)], 0),
    # A stream that crosses WeNet's 5000-row position table.
    "late_offset": (ModelConfig(output_dim=31, output_size=64, attention_heads=4,
                                linear_units=128, num_blocks=2, cnn_module_kernel=15),
                    "float32", 4.0, [(16, -1), (8, 2)], 5070),
}


def speech(seconds: float, seed: int):
    """(16 kHz float samples, source description)."""
    if shutil.which("espeak-ng"):
        text = ("the quick brown fox jumps over the lazy dog while seven streams "
                "of speech arrive at the server one chunk at a time")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.wav")
            subprocess.run(["espeak-ng", "-s", "150", "-w", path, text], check=True)
            wav, rate = torchaudio.load(path)
        wav = torchaudio.functional.resample(wav[0], rate, frontend.SAMPLE_RATE)
        n = int(seconds * frontend.SAMPLE_RATE)
        if wav.numel() < n:
            wav = torch.cat([wav, frontend.synthetic_speech(seconds, seed)[: n - wav.numel()]])
        return wav[:n].contiguous(), "espeak-ng"
    return frontend.synthetic_speech(seconds, seed), "synthetic"


def write_case(out: str, name: str, seed: int) -> dict:
    cfg, dtype, seconds, runs, start_offset = CASES[name]
    case_dir = os.path.join(out, name)
    os.makedirs(case_dir, exist_ok=True)
    wav, _ = speech(seconds, seed)
    feats = frontend.fbank(wav)
    torch.manual_seed(seed)
    model = randomize_(ConformerCtcModel(cfg), seed)
    mean, istd = frontend.cmvn_from_stats(frontend.cmvn_stats(feats))
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    mdir = os.path.join(case_dir, "model")
    model_dir.write_model_dir(model, mdir, dtype=dtype, chunk_size=runs[0][0],
                              num_left_chunks=runs[0][1], cmvn_as_json=(name == "small_bn"))
    model = model_dir.load_model_dir(mdir)
    np.save(os.path.join(case_dir, "feats.npy"), feats.numpy().astype(np.float32))
    entry = {"name": name, "model_dir": mdir, "feats": os.path.join(case_dir, "feats.npy"),
             "runs": []}
    with torch.no_grad():
        for chunk, left in runs:
            if start_offset == 0:
                lp = model.log_probs_full(feats.unsqueeze(0), chunk, left)[0]
            else:
                lp = model.log_probs_streaming(feats.unsqueeze(0), chunk, left, start_offset)[0]
            path = os.path.join(case_dir, f"log_probs_c{chunk}_l{left}.npy")
            np.save(path, lp.numpy().astype(np.float32))
            entry["runs"].append({"chunk_size": chunk, "num_left_chunks": left,
                                  "start_offset": start_offset, "log_probs": path})
    return entry


def write_converted_case(out: str, seed: int) -> dict:
    """A model written as a WeNet v2 experiment (final.pt with a "module."
    prefix and a bitransformer decoder, train.yaml with WeNet's recipe keys,
    global_cmvn, units.txt) and converted by tools/convert_wenet.py;
    log-probs come from the original model."""
    from tools import convert_wenet

    cfg = ModelConfig(output_dim=41, output_size=64, attention_heads=4, linear_units=128,
                      num_blocks=2, cnn_module_kernel=15, cnn_module_norm="batch_norm")
    case_dir = os.path.join(out, "wenet_converted")
    src = os.path.join(case_dir, "wenet")
    wav, _ = speech(3.0, seed)
    feats = frontend.fbank(wav)
    model = randomize_(ConformerCtcModel(cfg), seed)
    stats = frontend.cmvn_stats(feats)
    mean, istd = frontend.cmvn_from_stats(stats)
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    dcfg = attention.DecoderConfig("bitransformer", 4, 96, 1, 1)
    decoder = randomize_(attention.build_decoder(dcfg, cfg.output_dim, cfg.output_size), seed + 1)
    wenet_layout.write_experiment(model, decoder, dcfg, src, stats, module_prefix=True)
    mdir = os.path.join(case_dir, "model")
    rc = convert_wenet.main(["--checkpoint", os.path.join(src, "final.pt"), "--output", mdir,
                             "--chunk-size", "8", "--num-left-chunks", "-1"])
    if rc != 0:
        raise RuntimeError(f"convert_wenet failed on {src}")
    np.save(os.path.join(case_dir, "feats.npy"), feats.numpy().astype(np.float32))
    entry = {"name": "wenet_converted", "model_dir": mdir,
             "feats": os.path.join(case_dir, "feats.npy"), "runs": []}
    with torch.no_grad():
        for chunk, left in ((8, -1), (4, 2)):
            lp = model.log_probs_full(feats.unsqueeze(0), chunk, left)[0]
            path = os.path.join(case_dir, f"log_probs_c{chunk}_l{left}.npy")
            np.save(path, lp.numpy().astype(np.float32))
            entry["runs"].append({"chunk_size": chunk, "num_left_chunks": left,
                                  "start_offset": 0, "log_probs": path})
    return entry


# name: (decoder config, rescoring weights in decoder.json, other weights to score,
#        the encoder's subsampling)
RESCORING_CASES = {
    "u2_rescoring": (attention.DecoderConfig("transformer", 4, 160, 3, 0),
                     model_dir.Rescoring(0.5, 0.0, 1.0), [(0.3, 0.0, 1.0), (1.0, 0.0, 0.5)],
                     "conv2d"),
    "u2pp_rescoring": (attention.DecoderConfig("bitransformer", 4, 160, 2, 2),
                       model_dir.Rescoring(0.3, 0.5, 1.0), [(0.5, 0.0, 1.0), (0.5, 1.0, 1.0)],
                       "conv2d6"),
    "u2pp_rescoring_sub8": (attention.DecoderConfig("bitransformer", 2, 96, 1, 1),
                            model_dir.Rescoring(0.5, 0.3, 1.0), [(0.1, 0.0, 2.0)], "conv2d8"),
}


def write_rescoring_case(out: str, name: str, seed: int) -> dict:
    from tools.ctc_reference import Phrases, prefix_beam_search

    dcfg, rescoring, extra_weights, input_layer = RESCORING_CASES[name]
    cfg = ModelConfig(output_dim=37, output_size=64, attention_heads=4, linear_units=128,
                      num_blocks=2, cnn_module_kernel=8, input_layer=input_layer)
    chunk = 8
    case_dir = os.path.join(out, name)
    os.makedirs(case_dir, exist_ok=True)
    wav, _ = speech(3.0, seed)
    feats = frontend.fbank(wav)
    model = randomize_(ConformerCtcModel(cfg), seed)
    mean, istd = frontend.cmvn_from_stats(frontend.cmvn_stats(feats))
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    module = randomize_(attention.build_decoder(dcfg, cfg.output_dim, cfg.output_size), seed + 1)
    sos = eos = cfg.output_dim - 1
    mdir = os.path.join(case_dir, "model")
    model_dir.write_model_dir(model, mdir, chunk_size=chunk, decoder=model_dir.AttentionDecoder(
        dcfg, module, sos, eos, rescoring))
    model = model_dir.load_model_dir(mdir)
    dec = model_dir.load_decoder(mdir)
    with torch.no_grad():
        encoder_out = model.encoder.forward_full(feats.unsqueeze(0), chunk)[0]
        log_probs = model.ctc(encoder_out)
    nbest = prefix_beam_search(log_probs.double().tolist(), 10, 10, 0, 0.0, Phrases([]))
    hyps = [h["tokens"] for h in nbest]
    ctc_scores = [h["ctc_score"] for h in nbest]
    paths = {"feats": os.path.join(case_dir, "feats.npy"),
             "encoder_out": os.path.join(case_dir, "encoder_out.npy")}
    np.save(paths["feats"], feats.numpy().astype(np.float32))
    np.save(paths["encoder_out"], encoder_out.numpy().astype(np.float32))
    left, right = attention.directions(dec.module)
    for side, module_ in (("left", left), ("right", right)):
        if module_ is not None:
            lp = attention.decoder_log_probs(module_, encoder_out, hyps, sos, eos,
                                             reverse=(side == "right"))
            paths[f"{side}_log_probs"] = os.path.join(case_dir, f"{side}_log_probs.npy")
            np.save(paths[f"{side}_log_probs"], lp.numpy().astype(np.float32))
    runs = []
    weights = [(rescoring.ctc_weight, rescoring.reverse_weight, rescoring.rescoring_weight)]
    for ctc_weight, reverse_weight, rescoring_weight in weights + extra_weights:
        r = attention.attention_rescoring(dec.module, encoder_out, hyps, ctc_scores, sos, eos,
                                          ctc_weight, reverse_weight, rescoring_weight)
        runs.append({"ctc_weight": ctc_weight, "reverse_weight": reverse_weight,
                     "rescoring_weight": rescoring_weight, "best": r.best, "scores": r.scores,
                     "left_scores": r.left_scores, "right_scores": r.right_scores})
    return {"name": name, "model_dir": mdir, "chunk_size": chunk, "num_left_chunks": -1,
            "hyps": hyps, "ctc_scores": ctc_scores, "runs": runs, **paths}


def write_fbank(out: str) -> dict:
    fdir = os.path.join(out, "fbank")
    os.makedirs(fdir, exist_ok=True)
    wav, source = speech(3.0, 7)
    np.save(os.path.join(fdir, "wave.npy"), wav.numpy().astype(np.float32))
    np.save(os.path.join(fdir, "fbank.npy"), frontend.fbank(wav).numpy().astype(np.float32))
    return {"wave": os.path.join(fdir, "wave.npy"), "fbank": os.path.join(fdir, "fbank.npy"),
            "source": source}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    names = args.only or list(CASES) + ["wenet_converted"] + list(RESCORING_CASES)
    manifest = {"fbank": write_fbank(args.out), "cases": [], "rescoring": []}
    for i, name in enumerate(names):
        if name == "wenet_converted":
            manifest["cases"].append(write_converted_case(args.out, 1000 + i))
        elif name in RESCORING_CASES:
            manifest["rescoring"].append(write_rescoring_case(args.out, name, 1000 + i))
        else:
            manifest["cases"].append(write_case(args.out, name, 1000 + i))
    tmp = os.path.join(args.out, "manifest.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    os.replace(tmp, os.path.join(args.out, "manifest.json"))


if __name__ == "__main__":
    main()
