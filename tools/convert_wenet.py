#!/usr/bin/env python3
"""Converts a WeNet U2/U2++ Conformer checkpoint into an oasr model directory.

  convert_wenet.py --checkpoint final.pt --config train.yaml \
      [--cmvn global_cmvn] --units units.txt --output DIR \
      [--dtype float32|float16|bfloat16] [--chunk-size 16] [--num-left-chunks -1]

Reads the state_dict (a "module." prefix is stripped), keeps the encoder and
CTC weights under WeNet's names, drops what serving does not use (the
attention decoder, the 5000-row position buffer, BatchNorm counters), and
checks every name and shape against the geometry in train.yaml. The global
CMVN comes from the checkpoint's encoder.global_cmvn buffers or, when they
are absent, from the WeNet global_cmvn JSON; when both are given they must
agree. Any problem is reported as one line naming the key or field, with exit
status 1. Needs /usr/bin/python3 with torch and yaml.
"""

import argparse
import os
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.reference import frontend, model_dir  # noqa: E402
from tools.reference.model import ConformerCtcModel, ModelConfig  # noqa: E402


class ConversionError(Exception):
    pass


# Values each option must have for the maths the server implements.
REQUIRED_VALUES = {
    "pos_enc_layer_type": ("rel_pos",),
    "selfattention_layer_type": ("rel_selfattn",),
    "normalize_before": (True,),
    "macaron_style": (True,),
    "activation_type": ("swish",),
    "use_cnn_module": (True,),
    "causal": (True,),
    "cnn_module_norm": ("layer_norm", "batch_norm"),
    "input_layer": ("conv2d", "conv2d6", "conv2d8"),
}
# Options that only matter for training, or whose only supported value is
# the default; anything else in encoder_conf is refused rather than ignored.
TRAINING_ONLY = {"dropout_rate", "positional_dropout_rate", "attention_dropout_rate",
                 "use_dynamic_left_chunk", "gradient_checkpointing", "use_sdpa",
                 "global_cmvn", "cnn_module_kernel_size"}
DEFAULT_ONLY = {"query_bias": True, "key_bias": True, "value_bias": True,
                "conv_bias": True, "layer_norm_type": "layer_norm", "norm_eps": 1e-5,
                "mlp_type": "position_wise_feed_forward", "mlp_bias": True,
                "n_expert": None, "n_expert_activated": None, "conv_norm_eps": 1e-5,
                "conv_inner_factor": 2, "final_norm": True, "concat_after": False,
                "zero_triu": False, "cnn_module_activation": "swish"}
INT_KEYS = ("output_size", "attention_heads", "linear_units", "num_blocks",
            "cnn_module_kernel", "static_chunk_size")


def build_config(train: dict) -> ModelConfig:
    for key in ("input_dim", "output_dim", "encoder", "encoder_conf"):
        if key not in train:
            raise ConversionError(f"train.yaml: missing field '{key}'")
    if train["encoder"] != "conformer":
        raise ConversionError(
            f"train.yaml: unsupported option encoder={train['encoder']} (only 'conformer')")
    if train["input_dim"] != 80:
        raise ConversionError(f"train.yaml: unsupported option input_dim={train['input_dim']} "
                              "(the front end makes 80 mel bins)")
    conf = train["encoder_conf"]
    fields = {}
    for key in model_dir.ENCODER_CONF_KEYS:
        if key not in conf:
            raise ConversionError(f"train.yaml: missing field 'encoder_conf.{key}'")
        value = conf[key]
        if key in REQUIRED_VALUES and value not in REQUIRED_VALUES[key]:
            raise ConversionError(
                f"train.yaml: unsupported option encoder_conf.{key}={value} "
                f"(supported: {', '.join(str(v) for v in REQUIRED_VALUES[key])})")
        if key in INT_KEYS and (not isinstance(value, int) or isinstance(value, bool)
                                or value < 0):
            raise ConversionError(f"train.yaml: encoder_conf.{key}={value} is not a "
                                  "non-negative integer")
        fields[key] = value
    for key, value in conf.items():
        if key in fields or key in TRAINING_ONLY:
            continue
        if key in DEFAULT_ONLY:
            if value != DEFAULT_ONLY[key]:
                raise ConversionError(f"train.yaml: unsupported option encoder_conf.{key}="
                                      f"{value} (only {DEFAULT_ONLY[key]})")
            continue
        raise ConversionError(f"train.yaml: unknown option encoder_conf.{key}={value}")
    if fields["output_size"] % fields["attention_heads"] != 0:
        raise ConversionError("train.yaml: encoder_conf.output_size must be a multiple of "
                              "encoder_conf.attention_heads")
    return ModelConfig(input_dim=train["input_dim"], output_dim=train["output_dim"], **fields)


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


def select_weights(state: dict, cfg: ModelConfig) -> dict:
    state = {(k[len("module."):] if k.startswith("module.") else k): v for k, v in state.items()}
    kept = {}
    for name, value in state.items():
        if (name.startswith("decoder.") or name == "encoder.embed.pos_enc.pe"
                or name.endswith("num_batches_tracked")):
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


def resolve_cmvn(weights: dict, cmvn_path: str):
    in_ckpt = "encoder.global_cmvn.mean" in weights
    from_json = frontend.load_cmvn_json(cmvn_path) if cmvn_path else None
    if not in_ckpt and from_json is None:
        raise ConversionError("no global CMVN: the checkpoint has no encoder.global_cmvn and "
                              "no --cmvn file was given")
    if in_ckpt and from_json is not None:
        for name, value in zip(("mean", "istd"), from_json):
            ckpt = weights[f"encoder.global_cmvn.{name}"]
            if not torch.allclose(ckpt, value, rtol=1e-4, atol=1e-5):
                raise ConversionError(f"--cmvn disagrees with the checkpoint's "
                                      f"encoder.global_cmvn.{name}")
    if not in_ckpt:
        weights["encoder.global_cmvn.mean"], weights["encoder.global_cmvn.istd"] = from_json


def convert(checkpoint: str, config: str, cmvn: str, units: str, output: str,
            dtype: str = "float32", chunk_size: int = 16, num_left_chunks: int = -1):
    if dtype not in model_dir.DTYPES:
        raise ConversionError(f"--dtype {dtype}: expected one of {', '.join(model_dir.DTYPES)}")
    if chunk_size <= 0 or num_left_chunks < -1:
        raise ConversionError("--chunk-size must be positive and --num-left-chunks >= -1")
    with open(config, encoding="utf-8") as f:
        cfg = build_config(yaml.safe_load(f))
    unit_list = read_units(units, cfg.output_dim)
    state = torch.load(checkpoint, map_location="cpu")
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    weights = select_weights(state, cfg)
    resolve_cmvn(weights, cmvn)
    model = ConformerCtcModel(cfg)
    model.load_state_dict(weights, strict=False)
    model_dir.write_model_dir(model.eval(), output, dtype=dtype, chunk_size=chunk_size,
                              num_left_chunks=num_left_chunks, units=unit_list)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="WeNet checkpoint -> oasr model directory")
    p.add_argument("--checkpoint", required=True, help="final.pt (state_dict)")
    p.add_argument("--config", required=True, help="train.yaml")
    p.add_argument("--cmvn", default=None, help="WeNet global_cmvn JSON")
    p.add_argument("--units", required=True, help="units.txt")
    p.add_argument("--output", required=True, help="model directory to write")
    p.add_argument("--dtype", default="float32", help="float32, float16 or bfloat16")
    p.add_argument("--chunk-size", type=int, default=16)
    p.add_argument("--num-left-chunks", type=int, default=-1)
    a = p.parse_args(argv)
    try:
        convert(a.checkpoint, a.config, a.cmvn, a.units, a.output, a.dtype, a.chunk_size,
                a.num_left_chunks)
    except (ConversionError, OSError, yaml.YAMLError) as e:
        print(f"convert_wenet: {e}", file=sys.stderr)
        return 1
    print(f"convert_wenet: wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
