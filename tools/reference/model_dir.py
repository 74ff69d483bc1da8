"""Reads and writes oasr model directories and WeNet-layout checkpoints.

A model directory (docs/model-format.md) holds config.json, model.safetensors
(WeNet state_dict names, float32/float16/bfloat16) and units.txt; the global
CMVN is either inside the weights (encoder.global_cmvn.{mean,istd}) or a WeNet
global_cmvn JSON file beside them.
"""

import json
import os

import torch
import yaml

from . import frontend, safetensors_io
from .model import ConformerCtcModel, ModelConfig

FORMAT_NAME = "oasr-conformer-ctc"
FORMAT_VERSION = 1
ENCODER_CONF_KEYS = (
    "output_size", "attention_heads", "linear_units", "num_blocks", "input_layer",
    "pos_enc_layer_type", "selfattention_layer_type", "normalize_before",
    "macaron_style", "activation_type", "use_cnn_module", "cnn_module_kernel",
    "causal", "cnn_module_norm", "static_chunk_size", "use_dynamic_chunk")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def config_json(cfg: ModelConfig, chunk_size: int, num_left_chunks: int) -> dict:
    d = cfg.as_dict()
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "input_dim": cfg.input_dim,
        "output_dim": cfg.output_dim,
        "encoder": "conformer",
        "encoder_conf": {k: d[k] for k in ENCODER_CONF_KEYS},
        "serving": {"chunk_size": chunk_size, "num_left_chunks": num_left_chunks},
    }


def config_from_json(conf: dict) -> ModelConfig:
    enc = conf["encoder_conf"]
    fields = {k: enc[k] for k in ENCODER_CONF_KEYS}
    return ModelConfig(input_dim=conf["input_dim"], output_dim=conf["output_dim"], **fields)


def default_units(vocab: int) -> list:
    """A plausible BPE-like unit list of `vocab` entries (blank 0, unk 1,
    sos/eos last)."""
    units = ["<blank>", "<unk>"]
    units += [f"\u2581t{i}" if i % 3 == 0 else f"t{i}" for i in range(2, vocab - 1)]
    units.append("<sos/eos>")
    return units[:vocab]


def write_units(units: list, path: str):
    with open(path, "w", encoding="utf-8") as f:
        for i, u in enumerate(units):
            f.write(f"{u} {i}\n")


def round_weights_(model: ConformerCtcModel, dtype: str):
    """Rounds every float parameter through the on-disk dtype, so that the
    reference computes with exactly the weights a reader of the file sees."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point() and "global_cmvn" not in name:
                t.copy_(t.to(DTYPES[dtype]).to(torch.float32))
    return model


def write_model_dir(model: ConformerCtcModel, out_dir: str, dtype: str = "float32",
                    chunk_size: int = 16, num_left_chunks: int = -1, units=None,
                    cmvn_as_json: bool = False):
    """Writes model (weights rounded to `dtype` on disk; CMVN kept float32)."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {}
    for name, t in model.weights_state_dict().items():
        if "global_cmvn" in name:
            if not cmvn_as_json:
                tensors[name] = t.to(torch.float32)
            continue
        tensors[name] = t.to(DTYPES[dtype])
    if cmvn_as_json:
        mean = model.encoder.global_cmvn.mean.double()
        istd = model.encoder.global_cmvn.istd.double()
        var = 1.0 / (istd * istd)
        n = 1000
        stats = {"mean_stat": (mean * n).tolist(), "var_stat": ((var + mean * mean) * n).tolist(),
                 "frame_num": n}
        with open(os.path.join(out_dir, "global_cmvn"), "w", encoding="utf-8") as f:
            json.dump(stats, f)
    safetensors_io.save(tensors, os.path.join(out_dir, "model.safetensors"),
                        metadata={"format": FORMAT_NAME})
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_json(model.cfg, chunk_size, num_left_chunks), f, indent=2)
    write_units(units or default_units(model.cfg.output_dim), os.path.join(out_dir, "units.txt"))


def load_model_dir(model_dir: str) -> ConformerCtcModel:
    """The reference model (float32) of a model directory."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        conf = json.load(f)
    model = ConformerCtcModel(config_from_json(conf))
    tensors = safetensors_io.load(os.path.join(model_dir, "model.safetensors"))
    state = {k: v.to(torch.float32) for k, v in tensors.items()}
    cmvn_json = os.path.join(model_dir, "global_cmvn")
    if "encoder.global_cmvn.mean" not in state:
        mean, istd = frontend.load_cmvn_json(cmvn_json)
        state["encoder.global_cmvn.mean"] = mean
        state["encoder.global_cmvn.istd"] = istd
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"model directory mismatch: missing {missing}, unexpected {unexpected}")
    return model.eval()


def write_wenet_checkpoint(model: ConformerCtcModel, out_dir: str, cmvn_stats: dict,
                           with_cmvn_in_state: bool = True, module_prefix: bool = False):
    """Writes what a WeNet experiment directory holds for this model:
    final.pt (state_dict, with BatchNorm counters, the 5000-row pe buffer
    and a stand-in attention decoder), train.yaml, global_cmvn, units.txt."""
    os.makedirs(out_dir, exist_ok=True)
    cfg = model.cfg
    state = dict(model.state_dict())
    if not with_cmvn_in_state:
        state = {k: v for k, v in state.items() if "global_cmvn" not in k}
    state["encoder.embed.pos_enc.pe"] = torch.zeros(1, 5000, cfg.output_size)
    state["decoder.embed.0.weight"] = torch.zeros(cfg.output_dim, cfg.output_size)
    state["decoder.output_layer.weight"] = torch.zeros(cfg.output_dim, cfg.output_size)
    if module_prefix:
        state = {"module." + k: v for k, v in state.items()}
    torch.save(state, os.path.join(out_dir, "final.pt"))
    d = cfg.as_dict()
    enc_conf = {k: d[k] for k in ENCODER_CONF_KEYS}
    enc_conf.update({"dropout_rate": 0.1, "positional_dropout_rate": 0.1,
                     "attention_dropout_rate": 0.1})
    train = {
        "input_dim": cfg.input_dim,
        "output_dim": cfg.output_dim,
        "encoder": "conformer",
        "encoder_conf": enc_conf,
        "decoder": "bitransformer",
        "decoder_conf": {"attention_heads": cfg.attention_heads, "linear_units": 2048,
                         "num_blocks": 3, "r_num_blocks": 3},
        "model_conf": {"ctc_weight": 0.3, "lsm_weight": 0.1,
                       "length_normalized_loss": False, "reverse_weight": 0.3},
        "cmvn_file": "data/train/global_cmvn",
        "is_json_cmvn": True,
        "dataset_conf": {"fbank_conf": {"num_mel_bins": 80, "frame_shift": 10,
                                        "frame_length": 25, "dither": 1.0}},
    }
    with open(os.path.join(out_dir, "train.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(train, f, sort_keys=False)
    with open(os.path.join(out_dir, "global_cmvn"), "w", encoding="utf-8") as f:
        json.dump(cmvn_stats, f)
    write_units(default_units(cfg.output_dim), os.path.join(out_dir, "units.txt"))
