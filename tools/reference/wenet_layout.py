"""Writes reference models in the layouts WeNet users arrive with (fixtures).

  * `write_experiment(..., layout="v2")`: a training experiment as WeNet
    v2's train.py leaves it: final.pt (state_dict with BatchNorm counters,
    encoder, CTC and attention decoder), train.yaml with input_dim,
    output_dim, cmvn_file / is_json_cmvn at the top level and the encoder /
    decoder keys of WeNet's AISHELL U2++ recipe (which omit macaron_style and
    static_chunk_size), global_cmvn and units.txt beside it (as WeNet's
    released models ship them; the yaml's cmvn_file is recipe-relative).
  * `layout="v3"`: v3's train.yaml (cmvn: global_cmvn + cmvn_conf,
    tokenizer / tokenizer_conf with symbol_table_path and special_tokens,
    ctc_conf, model: asr_model), the CMVN and symbol table at the relative
    paths the yaml names, and v3's registered position buffers in final.pt.
  * `write_runtime`: final.zip (tools/reference/wenet_jit.py, shaped like
    WeNet's export_jit.py output) and units.txt, no train.yaml.

Random weights; no WeNet code is involved.
"""

import json
import os

import torch
import yaml

from . import wenet_jit
from .decoder import DecoderConfig
from .model import ConformerCtcModel, position_table
from .model_dir import default_units, write_units

# encoder_conf / decoder_conf keys of WeNet's examples/aishell/s0/conf/train_u2++_conformer.yaml.
RECIPE_ENCODER_KEYS = (
    "output_size", "attention_heads", "linear_units", "num_blocks", "dropout_rate",
    "positional_dropout_rate", "attention_dropout_rate", "input_layer", "normalize_before",
    "cnn_module_kernel", "use_cnn_module", "activation_type", "pos_enc_layer_type",
    "selfattention_layer_type", "causal", "use_dynamic_chunk", "cnn_module_norm",
    "use_dynamic_left_chunk")
RECIPE_DECODER_KEYS = ("attention_heads", "linear_units", "num_blocks", "r_num_blocks",
                       "dropout_rate", "positional_dropout_rate", "self_attention_dropout_rate",
                       "src_attention_dropout_rate")


def kaldi_cmvn_text(stats: dict) -> str:
    """Kaldi's text CMVN matrix (compute-cmvn-stats --binary=false) of WeNet's
    JSON statistics: [ sums count / sums of squares 0 ]."""
    first = " ".join(repr(float(x)) for x in stats["mean_stat"]) + f" {float(stats['frame_num'])}"
    second = " ".join(repr(float(x)) for x in stats["var_stat"]) + " 0"
    return f" [\n  {first}\n  {second} ]\n"


def checkpoint_state(model: ConformerCtcModel, decoder, pe_buffers: bool) -> dict:
    """WeNet's ASRModel state_dict keys for model + decoder (v3 registers the
    5000-row position tables as buffers; v2 keeps them out)."""
    state = dict(model.state_dict())
    if decoder is not None:
        state.update({"decoder." + k: v for k, v in decoder.state_dict().items()})
    if pe_buffers:
        table = position_table(0, 5000, model.cfg.output_size).unsqueeze(0)
        state["encoder.embed.pos_enc.pe"] = table
        sides = (["decoder.left_decoder.", "decoder.right_decoder."]
                 if hasattr(decoder, "right_decoder") else ["decoder."])
        for side in sides if decoder is not None else []:
            state[side + "embed.1.pe"] = table
    return state


def train_yaml(model: ConformerCtcModel, dcfg: DecoderConfig, layout: str, sos: int,
               train_reverse_weight: float = 0.3, tokenizer: str = "char",
               cmvn_kaldi: bool = False) -> dict:
    cfg = model.cfg.as_dict()
    enc = {k: cfg[k] for k in RECIPE_ENCODER_KEYS if k in cfg}
    enc.update({"dropout_rate": 0.1, "positional_dropout_rate": 0.1,
                "attention_dropout_rate": 0.1, "use_dynamic_left_chunk": False})
    enc = {k: enc[k] for k in RECIPE_ENCODER_KEYS}
    if model.cfg.static_chunk_size:
        enc["static_chunk_size"] = model.cfg.static_chunk_size
    dec = {"attention_heads": dcfg.attention_heads, "linear_units": dcfg.linear_units,
           "num_blocks": dcfg.num_blocks, "r_num_blocks": dcfg.r_num_blocks,
           "dropout_rate": 0.1, "positional_dropout_rate": 0.1,
           "self_attention_dropout_rate": 0.1, "src_attention_dropout_rate": 0.1}
    if not dcfg.bidirectional:
        dec.pop("r_num_blocks")
    train = {"input_dim": model.cfg.input_dim, "output_dim": model.cfg.output_dim,
             "encoder": "conformer", "encoder_conf": enc,
             "decoder": dcfg.decoder, "decoder_conf": dec}
    cmvn_path = "data/train/" + ("cmvn.ark.txt" if cmvn_kaldi else "global_cmvn")
    if layout == "v3":
        special = {"<blank>": 0, "<unk>": 1, "<sos>": sos, "<eos>": sos}
        train["tokenizer"] = tokenizer
        train["tokenizer_conf"] = {
            "symbol_table_path": "data/dict/lang_char.txt", "split_with_space": False,
            "bpe_path": "data/lang_char/bpe.model" if tokenizer == "bpe" else None,
            "non_lang_syms_path": None, "is_multilingual": False, "num_languages": 1,
            "special_tokens": special}
        train["ctc"] = "ctc"
        train["ctc_conf"] = {"ctc_blank_id": 0}
        train["cmvn"] = "global_cmvn"
        train["cmvn_conf"] = {"cmvn_file": cmvn_path, "is_json_cmvn": not cmvn_kaldi}
        train["model"] = "asr_model"
    train["model_conf"] = {"ctc_weight": 0.3, "lsm_weight": 0.1,
                           "length_normalized_loss": False,
                           "reverse_weight": train_reverse_weight}
    if layout == "v2":
        train["cmvn_file"] = cmvn_path
        train["is_json_cmvn"] = not cmvn_kaldi
    else:
        train["dataset"] = "asr"
    train["dataset_conf"] = {"fbank_conf": {"num_mel_bins": 80, "frame_shift": 10,
                                            "frame_length": 25, "dither": 1.0},
                             "resample_conf": {"resample_rate": 16000}}
    return train


def write_experiment(model: ConformerCtcModel, decoder, dcfg: DecoderConfig, out_dir: str,
                     cmvn_stats: dict, layout: str = "v2", with_cmvn_in_state: bool = True,
                     module_prefix: bool = False, cmvn_kaldi: bool = False,
                     train_reverse_weight: float = 0.3, sos: int = None,
                     tokenizer: str = "char") -> str:
    """Writes a WeNet experiment folder (see the module docstring); returns
    the path of its train.yaml. sos (= eos) defaults to V - 1."""
    os.makedirs(out_dir, exist_ok=True)
    vocab = model.cfg.output_dim
    sos = vocab - 1 if sos is None else sos
    state = checkpoint_state(model, decoder, pe_buffers=(layout == "v3"))
    if not with_cmvn_in_state:
        state = {k: v for k, v in state.items() if "global_cmvn" not in k}
    if module_prefix:
        state = {"module." + k: v for k, v in state.items()}
    torch.save(state, os.path.join(out_dir, "final.pt"))
    train = train_yaml(model, dcfg, layout, sos, train_reverse_weight, tokenizer, cmvn_kaldi)
    path = os.path.join(out_dir, "train.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(train, f, sort_keys=False, allow_unicode=True)
    cmvn_text = kaldi_cmvn_text(cmvn_stats) if cmvn_kaldi else json.dumps(cmvn_stats)
    units = default_units(vocab)
    if layout == "v3":
        cmvn_file = os.path.join(out_dir, train["cmvn_conf"]["cmvn_file"])
        units_file = os.path.join(out_dir, train["tokenizer_conf"]["symbol_table_path"])
        if tokenizer == "bpe":
            bpe_file = os.path.join(out_dir, train["tokenizer_conf"]["bpe_path"])
            os.makedirs(os.path.dirname(bpe_file), exist_ok=True)
            with open(bpe_file, "wb") as f:
                f.write(b"sentencepiece model bytes (fixture; copied, never parsed)\n")
    else:
        cmvn_file = os.path.join(out_dir, os.path.basename(train["cmvn_file"]))
        units_file = os.path.join(out_dir, "units.txt")
    for p in (cmvn_file, units_file):
        os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(cmvn_file, "w", encoding="utf-8") as f:
        f.write(cmvn_text)
    write_units(units, units_file)
    return path


def write_runtime(model: ConformerCtcModel, decoder, out_dir: str, sos: int = None,
                  prepare=None, **kwargs) -> str:
    """Writes final.zip (a TorchScript RuntimeModel) and units.txt; returns
    the final.zip path. prepare(runtime_model) may edit the module before it
    is scripted (tests use it to make models the converter must refuse)."""
    os.makedirs(out_dir, exist_ok=True)
    vocab = model.cfg.output_dim
    sos = vocab - 1 if sos is None else sos
    runtime = wenet_jit.RuntimeModel(model, decoder, sos, sos, **kwargs)
    if prepare is not None:
        prepare(runtime)
    path = os.path.join(out_dir, "final.zip")
    torch.jit.script(runtime).save(path)
    write_units(default_units(vocab), os.path.join(out_dir, "units.txt"))
    return path
