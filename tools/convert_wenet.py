#!/usr/bin/env python3
"""Converts a WeNet U2/U2++ Conformer model into an oasr model directory.

  training checkpoint (v2 or v3 train.yaml):
    convert_wenet.py --checkpoint exp/final.pt [--config exp/train.yaml] --output DIR
  runtime model (TorchScript, as WeNet's export_jit.py writes it):
    convert_wenet.py --torchscript final.zip [--units units.txt] --output DIR
  options: [--cmvn global_cmvn] [--units units.txt] [--bpe-model bpe.model]
    [--dtype float32|float16|bfloat16] [--chunk-size N] [--num-left-chunks -1]
    [--no-decoder] [--ctc-weight 0.5] [--reverse-weight 0.0] [--rescoring-weight 1.0]

Keeps the encoder, CTC and attention-decoder weights under WeNet's names,
drops what serving does not use (position tables, BatchNorm counters), and
checks every name and shape against the geometry: train.yaml's (absent
fields take WeNet's defaults, tools/wenet_config.py) or, for TorchScript, the
one its parameters and attributes imply. The global CMVN comes from the
encoder.global_cmvn buffers or, when absent, from the CMVN file the yaml (or
--cmvn) names; a model trained without CMVN gets the identity. Any problem
is one line naming the key, field or option, with exit status 1. Needs
/usr/bin/python3 with torch and yaml.
"""

import argparse
import os
import pickle
import shutil
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools import wenet_config  # noqa: E402
from tools.reference import frontend, model_dir  # noqa: E402
from tools.reference.decoder import DecoderConfig, build_decoder  # noqa: E402
from tools.reference.model import (ConformerCtcModel, ModelConfig,  # noqa: E402
                                   subsampling_rate, subsampling_right_context)
from tools.wenet_config import ConversionError, NO_DECODER_HINT  # noqa: E402

DEFAULT_CHUNK = 16


def note(text: str):
    print(f"convert_wenet: {text}", file=sys.stderr)


def read_units(path: str, vocab: int) -> list:
    units = {}
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise ConversionError(f"{path}:{line_no}: expected 'token id'")
            token, idx = parts[0], int(parts[1])
            if idx in units:
                raise ConversionError(f"{path}:{line_no}: id {idx} appears twice")
            units[idx] = token
    if sorted(units) != list(range(len(units))):
        raise ConversionError(f"{path}: ids must be 0..N-1 without gaps")
    if len(units) != vocab:
        raise ConversionError(f"{path}: {len(units)} units but output_dim is {vocab}")
    if units.get(0) != "<blank>":
        raise ConversionError(f"{path}: id 0 must be <blank>, got {units.get(0)}")
    return [units[i] for i in range(len(units))]


def load_kaldi_cmvn(path: str) -> dict:
    """Kaldi's text CMVN statistics (compute-cmvn-stats --binary=false):
    [ sum_1 .. sum_D count
      sumsq_1 .. sumsq_D 0 ] -> WeNet's JSON statistics."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw.startswith(b"\0B"):
        raise ConversionError(f"{path}: a binary Kaldi CMVN file; write it with "
                              "compute-cmvn-stats --binary=false")
    tokens = raw.decode("utf-8").split()
    if len(tokens) < 6 or tokens[0] != "[" or tokens[-1] != "]" or len(tokens) % 2:
        raise ConversionError(f"{path}: not a Kaldi text CMVN matrix '[ ... ]' of 2 rows")
    values = [float(t) for t in tokens[1:-1]]
    dim = len(values) // 2 - 1
    return {"mean_stat": values[:dim], "frame_num": values[dim],
            "var_stat": values[dim + 1:2 * dim + 1]}


def load_cmvn_file(path: str, is_json=None):
    """(mean, istd) float32 [D] from WeNet's JSON or Kaldi's text statistics
    (is_json None: whichever the file is, by its first character)."""
    if is_json is None:
        with open(path, "rb") as f:
            is_json = f.read(64).lstrip()[:1] == b"{"
    try:
        if is_json:
            return frontend.load_cmvn_json(path)
        return frontend.cmvn_from_stats(load_kaldi_cmvn(path))
    except (ValueError, KeyError, TypeError) as e:
        raise ConversionError(f"{path}: not a usable CMVN file ({e})") from None


def unwrap_state(state) -> dict:
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    if not isinstance(state, dict):
        raise ConversionError("checkpoint: not a state_dict")
    return {(k[len("module."):] if k.startswith("module.") else k): v for k, v in state.items()}


_POSITION_TABLES = ("encoder.embed.pos_enc.pe", "decoder.embed.1.pe",
                    "decoder.left_decoder.embed.1.pe", "decoder.right_decoder.embed.1.pe")


def _ignored(name: str) -> bool:
    """State the server never reads: WeNet's 5000-row position tables (v3
    registers them as buffers; the table is computed instead) and BatchNorm
    counters."""
    return name in _POSITION_TABLES or name.endswith(".num_batches_tracked")


def select_weights(state: dict, cfg: ModelConfig) -> dict:
    """The encoder and CTC tensors (float32), checked against cfg."""
    kept = {}
    for name, value in state.items():
        if name.startswith("decoder.") or _ignored(name):
            continue
        if not torch.is_tensor(value):
            raise ConversionError(f"checkpoint: '{name}' is not a tensor")
        kept[name] = value.detach().to(torch.float32)
    expected = ConformerCtcModel(cfg).weights_state_dict()
    for name, ref in expected.items():
        if "global_cmvn" in name:
            continue
        if name not in kept:
            raise ConversionError(f"checkpoint: missing tensor '{name}'")
        if tuple(kept[name].shape) != tuple(ref.shape):
            raise ConversionError(f"checkpoint: tensor '{name}' has shape "
                                  f"{list(kept[name].shape)}, expected {list(ref.shape)}")
    for name in kept:
        if name not in expected:
            raise ConversionError(f"checkpoint: unexpected tensor '{name}'")
    return kept


def select_decoder(state: dict, cfg: DecoderConfig, vocab: int, d: int,
                   tied: bool = False) -> torch.nn.Module:
    """The attention decoder (reference module) with the checkpoint's weights;
    tied (decoder_conf.tie_word_embedding): an absent output_layer.weight is
    the token embedding."""
    module = build_decoder(cfg, vocab, d)
    expected = module.state_dict()
    got = {k[len("decoder."):]: v for k, v in state.items()
           if k.startswith("decoder.") and not _ignored(k)}
    for name in list(expected):
        # tie_word_embedding: the output layer may share the embedding.
        if tied and name.endswith("output_layer.weight") and name not in got:
            embedding = name.replace("output_layer.weight", "embed.0.weight")
            if embedding in got:
                got[name] = got[embedding]
    for name, ref in expected.items():
        if name not in got:
            raise ConversionError(f"checkpoint: missing tensor 'decoder.{name}' "
                                  f"(decoder={cfg.decoder}){NO_DECODER_HINT}")
        if not torch.is_tensor(got[name]) or tuple(got[name].shape) != tuple(ref.shape):
            raise ConversionError(f"checkpoint: tensor 'decoder.{name}' has shape "
                                  f"{list(getattr(got[name], 'shape', []))}, expected "
                                  f"{list(ref.shape)}{NO_DECODER_HINT}")
    for name in got:
        if name not in expected:
            raise ConversionError(f"checkpoint: unexpected tensor 'decoder.{name}' "
                                  f"(decoder={cfg.decoder}){NO_DECODER_HINT}")
    module.load_state_dict({k: v.detach().to(torch.float32) for k, v in got.items()})
    return module.eval()


def attach_cmvn(weights: dict, cmvn, dim: int):
    """Puts the CMVN into weights: the checkpoint's buffers when present
    (cross-checked with the file when one is given), else the file's, else
    (a model trained without CMVN) the identity. cmvn: (mean, istd), "none"
    or None (nothing known)."""
    in_ckpt = "encoder.global_cmvn.mean" in weights
    if in_ckpt and isinstance(cmvn, tuple):
        for name, value in zip(("mean", "istd"), cmvn):
            ckpt = weights[f"encoder.global_cmvn.{name}"]
            if ckpt.shape != value.shape or not torch.allclose(ckpt, value, rtol=1e-4, atol=1e-5):
                raise ConversionError(f"the CMVN file disagrees with the checkpoint's "
                                      f"encoder.global_cmvn.{name}")
    if in_ckpt:
        return
    if cmvn is None:
        raise ConversionError("no global CMVN: the checkpoint has no encoder.global_cmvn, "
                              "train.yaml names no CMVN file and no --cmvn file was given")
    if cmvn == "none":
        note("the model was trained without global CMVN; writing the identity")
        cmvn = (torch.zeros(dim), torch.ones(dim))
    weights["encoder.global_cmvn.mean"], weights["encoder.global_cmvn.istd"] = cmvn


def _find(flag_value, candidates, what: str, field: str):
    if flag_value:
        if not os.path.isfile(flag_value):
            raise ConversionError(f"--{what} {flag_value}: no such file")
        return flag_value
    found = wenet_config.first_existing(candidates)
    if found is None:
        where = f"train.yaml: {field}: " if field else ""
        raise ConversionError(f"{where}no {what} file at {' or '.join(candidates)} "
                              f"(pass --{what})")
    return found


def _write(cfg: ModelConfig, weights: dict, decoder, units_path: str, output: str, opts,
           bpe_path=None):
    unit_list = read_units(units_path, cfg.output_dim)
    chunk = opts.chunk_size
    if chunk is None:
        chunk = cfg.static_chunk_size if cfg.static_chunk_size > 0 else DEFAULT_CHUNK
    model = ConformerCtcModel(cfg)
    model.load_state_dict(weights, strict=False)
    model_dir.write_model_dir(model.eval(), output, dtype=opts.dtype, chunk_size=chunk,
                              num_left_chunks=opts.num_left_chunks, units=unit_list,
                              decoder=decoder)
    if bpe_path:
        shutil.copyfile(bpe_path, os.path.join(output, "bpe.model"))


def _attention_decoder(module, dcfg, sos, eos, vocab, d, train_reverse_weight, opts):
    if dcfg.bidirectional and opts.reverse_weight > 0 and train_reverse_weight <= 0:
        raise ConversionError(f"--reverse-weight {opts.reverse_weight}: the right-to-left "
                              f"decoder was not trained (model_conf.reverse_weight="
                              f"{train_reverse_weight}); use 0")
    if opts.reverse_weight > 0 and not dcfg.bidirectional:
        raise ConversionError(f"--reverse-weight {opts.reverse_weight} needs a bitransformer "
                              f"decoder (this one is decoder={dcfg.decoder}); use 0")
    dec = model_dir.AttentionDecoder(dcfg, module, sos, eos, model_dir.Rescoring(
        opts.ctc_weight, opts.reverse_weight, opts.rescoring_weight))
    try:
        dec.check(vocab, d)
    except ValueError as e:
        raise ConversionError(str(e)) from None
    return dec


def _check_options(opts):
    if opts.dtype not in model_dir.DTYPES:
        raise ConversionError(f"--dtype {opts.dtype}: expected one of "
                              f"{', '.join(model_dir.DTYPES)}")
    if opts.chunk_size is not None and not 1 <= opts.chunk_size <= 1024:
        raise ConversionError(f"--chunk-size {opts.chunk_size} is outside [1, 1024]")
    if opts.num_left_chunks < -1:
        raise ConversionError(f"--num-left-chunks {opts.num_left_chunks} is below -1")
    for flag, value, hi in (("--ctc-weight", opts.ctc_weight, None),
                            ("--rescoring-weight", opts.rescoring_weight, None),
                            ("--reverse-weight", opts.reverse_weight, 1)):
        if not value >= 0 or (hi is not None and value > hi):
            limit = f"[0, {hi}]" if hi is not None else "[0, inf)"
            raise ConversionError(f"{flag} {value} is outside {limit}")


def convert_checkpoint(checkpoint: str, config: str, output: str, opts):
    """final.pt + train.yaml (v2 or v3 layout) -> model directory."""
    _check_options(opts)
    yaml_dir = os.path.dirname(os.path.abspath(config))
    with open(config, encoding="utf-8") as f:
        tc = wenet_config.read_train_config(yaml.safe_load(f), yaml_dir, not opts.no_decoder)
    units_path = _find(opts.units, tc.units, "units", tc.units_field)
    try:
        state = torch.load(checkpoint, map_location="cpu")
    except (RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as e:
        raise ConversionError(f"{checkpoint}: not a PyTorch checkpoint "
                              f"({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    state = unwrap_state(state)
    cfg = tc.model
    if cfg.output_dim is None:
        if "ctc.ctc_lo.weight" not in state:
            raise ConversionError("train.yaml has no output_dim and the checkpoint no "
                                  "ctc.ctc_lo.weight")
        cfg.output_dim = int(state["ctc.ctc_lo.weight"].shape[0])
    weights = select_weights(state, cfg)
    cmvn = None
    if opts.cmvn:
        cmvn = load_cmvn_file(_find(opts.cmvn, [], "cmvn", ""))
    elif tc.cmvn.stated and tc.cmvn.path is None:
        cmvn = "none"
    elif tc.cmvn.path:
        found = wenet_config.first_existing(wenet_config.resolve_path(tc.cmvn.path, yaml_dir))
        if found:
            cmvn = load_cmvn_file(found, tc.cmvn.is_json)
        elif "encoder.global_cmvn.mean" in weights:
            note(f"{tc.cmvn.field}={tc.cmvn.path} not found; the checkpoint's "
                 "encoder.global_cmvn is used")
        else:
            _find(None, wenet_config.resolve_path(tc.cmvn.path, yaml_dir), "cmvn",
                  f"{tc.cmvn.field}={tc.cmvn.path}")
    attach_cmvn(weights, cmvn, cfg.input_dim)

    decoder = None
    if not opts.no_decoder:
        has_decoder = any(k.startswith("decoder.") and not _ignored(k) for k in state)
        if not has_decoder:
            note("the checkpoint has no decoder.* tensors; writing no attention decoder")
        elif tc.train_ctc_weight >= 1.0:
            note(f"model_conf.ctc_weight={tc.train_ctc_weight}: the attention decoder was not "
                 "trained; writing no attention decoder")
        else:
            if tc.decoder_error:
                raise ConversionError(tc.decoder_error)
            v = cfg.output_dim
            sos = v - 1 if tc.sos is None else tc.sos
            eos = v - 1 if tc.eos is None else tc.eos
            module = select_decoder(state, tc.decoder, v, cfg.output_size, tc.decoder_tied)
            decoder = _attention_decoder(module, tc.decoder, sos, eos, v, cfg.output_size,
                                         tc.train_reverse_weight, opts)
    if opts.bpe_model:
        bpe = _find(opts.bpe_model, [], "bpe-model", "")
    else:
        bpe = wenet_config.first_existing(tc.bpe)
        if tc.bpe and bpe is None:
            note(f"tokenizer_conf.bpe_path: no file at {' or '.join(tc.bpe)}; bpe.model is "
                 "not copied (pass --bpe-model)")
    _write(cfg, weights, decoder, units_path, output, opts, bpe)


# ---------------------------------------------------------------- TorchScript


def _attr(module, path: str, what: str):
    obj = module
    for part in path.split("."):
        if not hasattr(obj, part):
            raise ConversionError(f"TorchScript model: no attribute '{path}' ({what}); not a "
                                  "WeNet runtime model (export_jit.py of an ASRModel)")
        obj = getattr(obj, part)
    return obj


def _count(state: dict, prefix: str) -> int:
    n = 0
    while any(k.startswith(f"{prefix}{n}.") for k in state):
        n += 1
    return n


def _subsampling_from_convs(state: dict) -> str:
    w2 = state.get("encoder.embed.conv.2.weight")
    if "encoder.embed.conv.0.weight" not in state or w2 is None:
        raise ConversionError("TorchScript model: no encoder.embed.conv.{0,2}.weight "
                              "(input_layer other than conv2d, conv2d6, conv2d8)")
    if "encoder.embed.conv.4.weight" in state:
        return "conv2d8"
    return "conv2d6" if w2.shape[-1] == 5 else "conv2d"


def read_torchscript(path: str, want_decoder: bool):
    """(ModelConfig, state, decoder parts or None, decoder error) of a WeNet
    runtime model, read from its parameters, attributes and methods."""
    try:
        m = torch.jit.load(path, map_location="cpu")
    except (RuntimeError, ValueError) as e:
        raise ConversionError(f"{path}: not a TorchScript model ({str(e).splitlines()[0]})")
    state = dict(m.state_dict())
    if any("_packed_params" in k for k in state):
        raise ConversionError(f"{path}: a quantized model (export_jit.py --output_quant_file); "
                              "convert the float final.zip")
    for method in ("subsampling_rate", "right_context", "sos_symbol", "eos_symbol",
                   "is_bidirectional_decoder"):
        if not hasattr(m, method):
            raise ConversionError(f"TorchScript model: no method {method}(); not a WeNet "
                                  "runtime model (export_jit.py of an ASRModel)")
    encoder_class = _attr(m, "encoder", "the encoder").original_name
    if encoder_class != "ConformerEncoder":
        raise ConversionError(f"TorchScript model: the encoder is a {encoder_class} (supported: "
                              "WeNet's ConformerEncoder, encoder=conformer)")
    l0 = "encoder.encoders.0."
    if "encoder.after_norm.weight" not in state or "ctc.ctc_lo.weight" not in state:
        raise ConversionError("TorchScript model: no encoder.after_norm.weight or "
                              "ctc.ctc_lo.weight (not a Conformer CTC model)")
    d = int(state["encoder.after_norm.weight"].shape[0])
    if "encoder.after_norm.bias" not in state or l0 + "norm_mha.bias" not in state:
        raise ConversionError("TorchScript model: LayerNorms without bias (layer_norm_type "
                              "rms_norm; supported: layer_norm)")
    if l0 + "self_attn.pos_bias_u" not in state or l0 + "self_attn.linear_pos.weight" not in state:
        raise ConversionError(f"TorchScript model: {l0}self_attn has no pos_bias_u / "
                              "linear_pos (pos_enc_layer_type / selfattention_layer_type other "
                              "than rel_pos / rel_selfattn: abs, rope or shaw positions)")
    heads, d_k = (int(x) for x in state[l0 + "self_attn.pos_bias_u"].shape)
    if heads * d_k != d:
        raise ConversionError(f"TorchScript model: pos_bias_u is [{heads}, {d_k}] for width "
                              f"{d} (head_dim other than output_size / attention_heads)")
    k_rows = int(state[l0 + "self_attn.linear_k.weight"].shape[0])
    if k_rows != d:
        raise ConversionError(f"TorchScript model: {l0}self_attn.linear_k.weight has {k_rows} "
                              f"rows for width {d} (grouped KV heads, n_kv_head; supported: "
                              f"{heads} heads of keys and values)")
    if l0 + "feed_forward.gate.weight" in state or l0 + "feed_forward.w_1.weight" not in state:
        raise ConversionError(f"TorchScript model: {l0}feed_forward is not WeNet's "
                              "position_wise_feed_forward (mlp_type gated or moe)")
    if l0 + "feed_forward_macaron.w_1.weight" not in state:
        raise ConversionError("TorchScript model: no feed_forward_macaron (macaron_style=False; "
                              "supported: True)")
    if l0 + "conv_module.depthwise_conv.weight" not in state:
        raise ConversionError("TorchScript model: no conv_module (use_cnn_module=False; "
                              "supported: True)")
    input_layer = _subsampling_from_convs(state)
    rate, right = int(m.subsampling_rate()), int(m.right_context())
    if (rate, right) != (subsampling_rate(input_layer), subsampling_right_context(input_layer)):
        raise ConversionError(f"TorchScript model: subsampling_rate()={rate}, right_context()="
                              f"{right} disagree with the {input_layer} convs")
    num_blocks = _count(state, "encoder.encoders.")
    layers = _attr(m, "encoder.encoders", "the Conformer layers")
    for i in range(num_blocks):
        lorder = _attr(getattr(layers, str(i)), "conv_module.lorder", "conv cache length")
        if lorder <= 0:
            raise ConversionError(f"TorchScript model: encoder.encoders.{i}.conv_module.lorder="
                                  f"{lorder} (causal=False: a non-causal conv module cannot "
                                  "stream; supported: causal=True)")
    layer0 = getattr(layers, "0")
    for where in ("feed_forward.activation", "conv_module.activation"):
        name = _attr(layer0, where, "the activation").original_name
        if name not in ("SiLU", "Swish"):
            raise ConversionError(f"TorchScript model: encoder.encoders.0.{where} is {name} "
                                  "(activation_type other than swish; supported: swish)")
    if not _attr(m, "encoder.normalize_before", "pre-norm layers"):
        raise ConversionError("TorchScript model: encoder.normalize_before=False (supported: "
                              "True)")
    eps = float(_attr(m, "encoder.after_norm.eps", "LayerNorm epsilon"))
    if abs(eps - 1e-5) > 1e-12:
        raise ConversionError(f"TorchScript model: encoder.after_norm.eps={eps} (norm_eps; "
                              "supported: 1e-05)")
    static = int(_attr(m, "encoder.static_chunk_size", "training chunk size"))
    dynamic = bool(_attr(m, "encoder.use_dynamic_chunk", "dynamic chunk training"))
    if static == 0 and not dynamic:
        raise ConversionError("TorchScript model: encoder.static_chunk_size=0 with "
                              "use_dynamic_chunk=False is a full-context model, which cannot "
                              "be served chunk by chunk")
    norm = ("batch_norm" if l0 + "conv_module.norm.running_mean" in state else "layer_norm")
    cfg = ModelConfig(
        input_dim=80, output_dim=int(state["ctc.ctc_lo.weight"].shape[0]), output_size=d,
        attention_heads=heads, linear_units=int(state[l0 + "feed_forward.w_1.weight"].shape[0]),
        num_blocks=num_blocks, input_layer=input_layer,
        cnn_module_kernel=int(state[l0 + "conv_module.depthwise_conv.weight"].shape[-1]),
        cnn_module_norm=norm, static_chunk_size=static, use_dynamic_chunk=dynamic)
    norm_var = getattr(getattr(m.encoder, "global_cmvn", None), "norm_var", True)
    if not norm_var:
        raise ConversionError("TorchScript model: encoder.global_cmvn.norm_var=False (mean "
                              "only; supported: True, WeNet's default)")
    mean = state.get("encoder.global_cmvn.mean")
    if mean is not None and tuple(mean.shape) != (80,):
        raise ConversionError(f"TorchScript model: encoder.global_cmvn.mean has shape "
                              f"{list(mean.shape)} (input_dim; the front end makes 80 mel bins)")
    if not want_decoder or not any(k.startswith("decoder.") for k in state):
        return cfg, state, None, None
    if float(getattr(m, "ctc_weight", 0.5)) >= 1.0:
        note(f"ctc_weight={m.ctc_weight}: the attention decoder was not trained; writing no "
             "attention decoder")
        return cfg, state, None, None
    try:
        return cfg, state, _torchscript_decoder(m, state, d), None
    except ConversionError as e:
        return cfg, state, None, str(e)


def _torchscript_decoder(m, state: dict, d: int):
    bidirectional = bool(m.is_bidirectional_decoder())
    sides = ["decoder.left_decoder.", "decoder.right_decoder."] if bidirectional else ["decoder."]
    blocks = [_count(state, side + "decoders.") for side in sides]
    if blocks[0] < 1:
        raise ConversionError(f"TorchScript model: no {sides[0]}decoders.0 (not a transformer "
                              f"decoder){NO_DECODER_HINT}")
    top = _attr(m, sides[0][:-1], "the decoder")
    layer0 = getattr(_attr(top, "decoders", "decoder layers"), "0")
    heads = int(_attr(layer0, "self_attn.h", "decoder attention heads"))
    act = _attr(layer0, "feed_forward.activation", "decoder activation").original_name
    if act != "ReLU":
        raise ConversionError(f"TorchScript model: {sides[0]}decoders.0.feed_forward.activation "
                              f"is {act} (decoder activation_type other than relu)"
                              f"{NO_DECODER_HINT}")
    units = state[sides[0] + "decoders.0.feed_forward.w_1.weight"].shape[0]
    cfg = DecoderConfig("bitransformer" if bidirectional else "transformer", heads, int(units),
                        blocks[0], blocks[1] if bidirectional else 0)
    train_rw = float(getattr(m, "reverse_weight", 0.0))
    return cfg, int(m.sos_symbol()), int(m.eos_symbol()), train_rw


def convert_torchscript(path: str, output: str, opts):
    """final.zip (WeNet runtime model) + units.txt -> model directory."""
    _check_options(opts)
    units_path = _find(opts.units, [os.path.join(os.path.dirname(os.path.abspath(path)),
                                                 "units.txt")], "units", "")
    cfg, state, dec_parts, dec_error = read_torchscript(path, not opts.no_decoder)
    weights = select_weights(state, cfg)
    cmvn = load_cmvn_file(_find(opts.cmvn, [], "cmvn", "")) if opts.cmvn else "none"
    attach_cmvn(weights, cmvn, cfg.input_dim)
    if dec_error:
        raise ConversionError(dec_error)
    decoder = None
    if dec_parts is not None:
        dcfg, sos, eos, train_rw = dec_parts
        module = select_decoder(state, dcfg, cfg.output_dim, cfg.output_size)
        decoder = _attention_decoder(module, dcfg, sos, eos, cfg.output_dim, cfg.output_size,
                                     train_rw, opts)
    elif not opts.no_decoder and not any(k.startswith("decoder.") for k in state):
        note("the model has no decoder.* tensors; writing no attention decoder")
    bpe = _find(opts.bpe_model, [], "bpe-model", "") if opts.bpe_model else None
    _write(cfg, weights, decoder, units_path, output, opts, bpe)


def parser():
    p = argparse.ArgumentParser(description="WeNet model -> oasr model directory")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="training checkpoint final.pt (a state_dict)")
    src.add_argument("--torchscript", help="runtime model final.zip (export_jit.py)")
    p.add_argument("--config", help="train.yaml (default: train.yaml beside --checkpoint)")
    p.add_argument("--cmvn", help="global CMVN statistics (default: the file train.yaml names)")
    p.add_argument("--units", help="units.txt (default: train.yaml's symbol table, or "
                                   "units.txt beside train.yaml / final.zip)")
    p.add_argument("--bpe-model", help="sentencepiece model to copy as DIR/bpe.model "
                                       "(default: tokenizer_conf.bpe_path when it exists)")
    p.add_argument("--output", required=True, help="model directory to write")
    p.add_argument("--dtype", default="float32", help="float32, float16 or bfloat16")
    p.add_argument("--chunk-size", type=int, default=None,
                   help="serving chunk (default: static_chunk_size when > 0, else 16)")
    p.add_argument("--num-left-chunks", type=int, default=-1)
    p.add_argument("--no-decoder", action="store_true",
                   help="leave the attention decoder out")
    p.add_argument("--ctc-weight", type=float, default=0.5, help="rescoring CTC weight")
    p.add_argument("--reverse-weight", type=float, default=0.0,
                   help="rescoring right-to-left weight (bitransformer)")
    p.add_argument("--rescoring-weight", type=float, default=1.0,
                   help="rescoring decoder weight")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    try:
        if a.torchscript:
            if a.config:
                raise ConversionError("--config is for --checkpoint; a TorchScript model "
                                      "carries its own geometry")
            convert_torchscript(a.torchscript, a.output, a)
        else:
            config = a.config or os.path.join(os.path.dirname(a.checkpoint), "train.yaml")
            convert_checkpoint(a.checkpoint, config, a.output, a)
    except (ConversionError, OSError, yaml.YAMLError) as e:
        print(f"convert_wenet: {e}", file=sys.stderr)
        return 1
    print(f"convert_wenet: wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
