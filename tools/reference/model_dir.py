"""Reads and writes oasr model directories.

A model directory (docs/model-format.md) holds config.json, model.safetensors
(WeNet state_dict names, float32/float16/bfloat16) and units.txt; the global
CMVN is either inside the weights (encoder.global_cmvn.{mean,istd}) or a WeNet
global_cmvn JSON file beside them. Optionally it also holds WeNet's attention
decoder for rescoring: its tensors under `decoder.` in model.safetensors and
its geometry and rescoring weights in decoder.json.
"""

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Optional

import torch
from torch import nn

from . import frontend, safetensors_io
from .decoder import DecoderConfig, build_decoder
from .model import ConformerCtcModel, ModelConfig

FORMAT_NAME = "oasr-conformer-ctc"
FORMAT_VERSION = 1
ENCODER_CONF_KEYS = (
    "output_size", "attention_heads", "linear_units", "num_blocks", "input_layer",
    "pos_enc_layer_type", "selfattention_layer_type", "normalize_before",
    "macaron_style", "activation_type", "use_cnn_module", "cnn_module_kernel",
    "causal", "cnn_module_norm", "static_chunk_size", "use_dynamic_chunk")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
DECODER_FORMAT_NAME = "oasr-attention-decoder"
DECODER_FILE = "decoder.json"


@dataclass
class Rescoring:
    """Attention-rescoring weights (WeNet runtime's flag names and defaults):
    total = rescoring_weight * decoder score + ctc_weight * CTC score, the
    decoder score mixing the right-to-left one in by reverse_weight."""

    ctc_weight: float = 0.5
    reverse_weight: float = 0.0
    rescoring_weight: float = 1.0


@dataclass
class AttentionDecoder:
    """What a model directory holds for attention rescoring."""

    cfg: DecoderConfig
    module: nn.Module  # decoder.TransformerDecoder or BiTransformerDecoder
    sos: int
    eos: int
    rescoring: Rescoring = field(default_factory=Rescoring)

    def check(self, vocab: int, d: int):
        """Raises ValueError naming the field, its value and the limit."""
        self.cfg.check(d)
        for name in ("sos", "eos"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab:
                raise ValueError(f"{DECODER_FILE}: {name}={value} is outside [0, {vocab - 1}]")
        r = self.rescoring
        for name in ("ctc_weight", "rescoring_weight"):
            value = getattr(r, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{DECODER_FILE}: rescoring.{name}={value} is not a number >= 0")
        if not isinstance(r.reverse_weight, (int, float)) or not 0 <= r.reverse_weight <= 1:
            raise ValueError(f"{DECODER_FILE}: rescoring.reverse_weight={r.reverse_weight} is "
                             "outside [0, 1]")
        if r.reverse_weight > 0 and not self.cfg.bidirectional:
            raise ValueError(f"{DECODER_FILE}: rescoring.reverse_weight={r.reverse_weight} needs "
                             f"a bitransformer decoder (decoder={self.cfg.decoder}; use 0)")


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


def decoder_json(dec: AttentionDecoder) -> dict:
    c = dec.cfg
    return {
        "format": DECODER_FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "decoder": c.decoder,
        "decoder_conf": {"attention_heads": c.attention_heads, "linear_units": c.linear_units,
                         "num_blocks": c.num_blocks, "r_num_blocks": c.r_num_blocks},
        "sos": dec.sos,
        "eos": dec.eos,
        "rescoring": asdict(dec.rescoring),
    }


def _exact_keys(obj, where: str, keys):
    if not isinstance(obj, dict):
        raise ValueError(f"{DECODER_FILE}: {where or 'the file'} is not an object")
    for key in obj:
        if key not in keys:
            raise ValueError(f"{DECODER_FILE}: unknown option '{where}{key}'")
    for key in keys:
        if key not in obj:
            raise ValueError(f"{DECODER_FILE}: missing field '{where}{key}'")


def decoder_from_json(conf: dict, vocab: int, d: int) -> AttentionDecoder:
    """The decoder a decoder.json describes (random weights), checked."""
    _exact_keys(conf, "", ("format", "format_version", "decoder", "decoder_conf", "sos", "eos",
                           "rescoring"))
    if conf["format"] != DECODER_FORMAT_NAME or conf["format_version"] != FORMAT_VERSION:
        raise ValueError(f"{DECODER_FILE}: format {conf['format']} version "
                         f"{conf['format_version']} (supported: {DECODER_FORMAT_NAME} "
                         f"{FORMAT_VERSION})")
    _exact_keys(conf["decoder_conf"], "decoder_conf.",
                ("attention_heads", "linear_units", "num_blocks", "r_num_blocks"))
    _exact_keys(conf["rescoring"], "rescoring.",
                ("ctc_weight", "reverse_weight", "rescoring_weight"))
    cfg = DecoderConfig(decoder=conf["decoder"], **conf["decoder_conf"])
    try:
        cfg.check(d)
    except ValueError as e:
        raise ValueError(f"{DECODER_FILE}: {e}") from None
    dec = AttentionDecoder(cfg, build_decoder(cfg, vocab, d), conf["sos"], conf["eos"],
                           Rescoring(**conf["rescoring"]))
    dec.check(vocab, d)
    return dec


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
                    cmvn_as_json: bool = False, decoder: Optional[AttentionDecoder] = None):
    """Writes model (weights rounded to `dtype` on disk; CMVN kept float32),
    and, when given, the attention decoder (its tensors under `decoder.` in
    the same dtype, decoder.json beside them)."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {}
    if decoder is not None:
        decoder.check(model.cfg.output_dim, model.cfg.output_size)
        for name, t in decoder.module.state_dict().items():
            tensors["decoder." + name] = t.to(DTYPES[dtype])
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
    decoder_path = os.path.join(out_dir, DECODER_FILE)
    if decoder is not None:
        with open(decoder_path, "w", encoding="utf-8") as f:
            json.dump(decoder_json(decoder), f, indent=2)
    elif os.path.exists(decoder_path):
        os.remove(decoder_path)  # a stale one would describe tensors that are gone
    write_units(units or default_units(model.cfg.output_dim), os.path.join(out_dir, "units.txt"))


def load_model_dir(model_dir: str) -> ConformerCtcModel:
    """The reference model (float32) of a model directory."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        conf = json.load(f)
    model = ConformerCtcModel(config_from_json(conf))
    tensors = safetensors_io.load(os.path.join(model_dir, "model.safetensors"))
    state = {k: v.to(torch.float32) for k, v in tensors.items() if not k.startswith("decoder.")}
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


def load_decoder(model_dir: str) -> Optional[AttentionDecoder]:
    """The attention decoder of a model directory (float32), or None when it
    has no decoder.json. Raises ValueError naming the file and the field or
    tensor at fault (decoder tensors without decoder.json included)."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        conf = json.load(f)
    tensors = safetensors_io.load(os.path.join(model_dir, "model.safetensors"))
    state = {k[len("decoder."):]: v.to(torch.float32) for k, v in tensors.items()
             if k.startswith("decoder.")}
    path = os.path.join(model_dir, DECODER_FILE)
    if not os.path.exists(path):
        if state:
            raise ValueError(f"{model_dir}: decoder.* tensors but no {DECODER_FILE}")
        return None
    with open(path, encoding="utf-8") as f:
        dec = decoder_from_json(json.load(f), conf["output_dim"],
                                conf["encoder_conf"]["output_size"])
    expected = dec.module.state_dict()
    for name, ref in expected.items():
        if name not in state:
            raise ValueError(f"{model_dir}: missing tensor 'decoder.{name}'")
        if tuple(state[name].shape) != tuple(ref.shape):
            raise ValueError(f"{model_dir}: tensor 'decoder.{name}' has shape "
                             f"{list(state[name].shape)}, expected {list(ref.shape)}")
    for name in state:
        if name not in expected:
            raise ValueError(f"{model_dir}: unexpected tensor 'decoder.{name}'")
    dec.module.load_state_dict(state)
    dec.module.eval()
    return dec
