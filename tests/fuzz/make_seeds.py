#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/<target>/.

Every seed is made here from scratch (synthesized tones, hand-written
headers and configs, the bundled model's small text files); none comes from
recorded audio. Protobuf messages are written in the wire format by hand, so
the script needs nothing beyond Python's standard library. Run from anywhere:

    python3 tests/fuzz/make_seeds.py
"""

import gzip
import json
import math
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
MODEL = os.path.join(ROOT, "models", "en-conformer-ctc")


def tone(n, rate=16000, hz=440.0, amp=8000):
    """`n` samples of a sine at `hz`, as 16-bit little-endian PCM."""
    return b"".join(struct.pack("<h", int(amp * math.sin(2 * math.pi * hz * i / rate)))
                    for i in range(n))


def chunk(tag, body):
    pad = b"\0" if len(body) % 2 else b""
    return tag + struct.pack("<I", len(body)) + body + pad


def wav(data, rate=16000, channels=1, fmt=1, bits=16, extensible=False, extra=b"",
        data_size=None):
    """A RIFF/WAVE file: fmt, any `extra` chunks, then data."""
    block = channels * bits // 8
    body = struct.pack("<HHIIHH", 0xFFFE if extensible else fmt, channels, rate, rate * block,
                       block, bits)
    if extensible:
        # cbSize, valid bits, channel mask, then the sub-format GUID (tag first).
        body += struct.pack("<HHI", 22, bits, 4) + struct.pack("<H", fmt) + bytes(14)
    data_chunk = chunk(b"data", data)
    if data_size is not None:
        data_chunk = b"data" + struct.pack("<I", data_size) + data
    riff = b"WAVE" + chunk(b"fmt ", body) + extra + data_chunk
    return b"RIFF" + struct.pack("<I", len(riff)) + riff


# ---- Protobuf wire format ------------------------------------------------

def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_int(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def f_float(num, v):
    return varint((num << 3) | 5) + struct.pack("<f", v)


def messages(api, *msgs):
    """A streaming_request input: the API's byte, then each message after its length."""
    out = bytes([api])
    for m in msgs:
        out += struct.pack("<H", len(m)) + m
    return out


def first(config, streaming_extra=b""):
    """StreamingRecognizeRequest{streaming_config{config, ...}} (field numbers shared by all three)."""
    return f_bytes(1, f_bytes(1, config) + streaming_extra)


def audio(payload):
    return f_bytes(2, payload)


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def audio_seeds():
    pcm = tone(120)
    mulaw = bytes((i * 37) & 0xFF for i in range(160))
    write("audio_codec", "linear16", b"\0" + pcm)
    write("audio_codec", "linear16_odd", b"\0" + pcm[:7])
    write("audio_codec", "mulaw", b"\1" + mulaw)
    write("audio_codec", "alaw", b"\2" + mulaw)
    write("audio_codec", "wav_pcm16", b"\0" + wav(pcm))
    write("audio_codec", "wav_mulaw", b"\1" + wav(mulaw, rate=8000, fmt=7, bits=8))
    write("audio_codec", "wav_alaw", b"\2" + wav(mulaw, rate=8000, fmt=6, bits=8))
    write("audio_codec", "wav_extensible", b"\0" + wav(pcm, extensible=True))
    write("audio_codec", "wav_list_chunk",
          b"\0" + wav(pcm, extra=chunk(b"LIST", b"INFOISFT\x05\0\0\0oasr\0")))
    write("audio_codec", "wav_streamed", b"\0" + wav(pcm, data_size=0xFFFFFFFF))

    write("wav_file", "pcm16_mono", wav(pcm))
    write("wav_file", "pcm16_stereo", wav(tone(200)[:400], channels=2))
    floats = b"".join(struct.pack("<f", 0.25 * math.sin(i / 5.0)) for i in range(100))
    write("wav_file", "float32", wav(floats, fmt=3, bits=32))
    write("wav_file", "float32_extensible", wav(floats, fmt=3, bits=32, extensible=True))
    write("wav_file", "odd_chunk", wav(pcm, extra=chunk(b"junk", b"abc")))
    write("wav_file", "streamed_size_zero", wav(pcm, data_size=0))
    write("wav_file", "mulaw_refused", wav(mulaw, rate=8000, fmt=7, bits=8))


def model_seeds():
    for name in ("config.json", "lm.json"):
        shutil.copy(os.path.join(MODEL, name), os.path.join(CORPUS, "model_json", name))
    write("model_json", "decoder.json", json.dumps({
        "format": "oasr-attention-decoder", "format_version": 1, "decoder": "bitransformer",
        "decoder_conf": {"attention_heads": 4, "linear_units": 2048, "num_blocks": 3,
                         "r_num_blocks": 3},
        "sos": 5001, "eos": 5001,
        "rescoring": {"ctc_weight": 0.3, "reverse_weight": 0.3, "rescoring_weight": 1.0}},
        indent=1).encode())
    write("model_json", "global_cmvn", json.dumps({
        "mean_stat": [100.0 + i for i in range(8)], "var_stat": [2000.0 + 3 * i for i in range(8)],
        "frame_num": 10}).encode())
    write("model_json", "lm_words_only.json",
          b'{"words": {"file": "w.arpa", "weight": 0.3, "word_bonus": 1, '
          b'"unknown_word_penalty": 4.5}}')

    def safetensors(tensors, metadata=None):
        header, data = {}, b""
        if metadata:
            header["__metadata__"] = metadata
        for name, dtype, shape, raw in tensors:
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        h = json.dumps(header).encode()
        return struct.pack("<Q", len(h)) + h + data

    f32 = struct.pack("<6f", 1, -2, 3.5, 0, 1e-3, -7)
    write("safetensors", "three_dtypes", safetensors([
        ("encoder.after_norm.weight", "F32", [2, 3], f32),
        ("ctc.ctc_lo.bias", "F16", [4], struct.pack("<4H", 0x3C00, 0xC000, 0x0001, 0x7C00)),
        ("encoder.after_norm.bias", "BF16", [2], struct.pack("<2H", 0x3F80, 0xBF80)),
    ], metadata={"format": "pt"}))
    write("safetensors", "int_and_empty", safetensors([
        ("steps", "I64", [1], struct.pack("<q", 7)),
        ("mask", "U8", [3], b"\1\0\1"),
        ("empty", "F32", [0, 4], b""),
        ("ids", "I32", [2], struct.pack("<2i", 1, -1)),
    ]))

    # 2^64 elements in no bytes: refused (the product must not wrap).
    write("safetensors", "huge_shape", safetensors([("w", "F32", [1 << 62, 4], b"")]))

    with open(os.path.join(MODEL, "units.txt"), "rb") as f:
        units = f.read()
    count = units.count(b"\n")
    write("units", "bundled", struct.pack("<H", count) + b"\0" + units)
    write("units", "chars", struct.pack("<H", 5) + b"\0" +
          "<blank> 0\n<unk> 1\n\u4f60 2\n\u597d 3\n<sos/eos> 4\n".encode())
    write("units", "huge_id", struct.pack("<H", 2) + b"\0" + b"<blank> 0\na 1000000000\n")
    write("units", "crlf_and_tabs", struct.pack("<H", 3) + b"\0" + b"<blank>\t0\r\na 2\r\n\r\nb 1\r\n")

    unit_arpa = "\n".join([
        "\\data\\", "ngram 1=6", "ngram 2=4", "ngram 3=1", "",
        "\\1-grams:", "-1.0\t</s>", "-99\t<s>\t-0.5", "-1.2\t<unk>", "-0.7\t\u2581the\t-0.3",
        "-0.9\t\u2581cat\t-0.2", "-1.5\ts", "",
        "\\2-grams:", "-0.3\t<s> \u2581the\t-0.1", "-0.2\t\u2581the \u2581cat\t-0.1",
        "-0.4\t\u2581cat s", "-0.5\t\u2581cat </s>", "",
        "\\3-grams:", "-0.1\t<s> \u2581the \u2581cat", "", "\\end\\", ""]).encode()
    write("arpa", "units_trigram", unit_arpa)
    write("arpa", "units_trigram.gz", gzip.compress(unit_arpa, mtime=0))
    word_arpa = "\n".join([
        "\\data\\", "ngram 1=5", "ngram 2=2", "",
        "\\1-grams:", "-1.0 </s>", "-99 <s> -0.4", "-2.0 <unk>", "-0.6 the -0.2", "-0.8 cat",
        "",
        "\\2-grams:", "-0.2 <s> the", "-0.3 the cat", "", "\\end\\", ""]).encode()
    write("arpa", "words_bigram", word_arpa)


def request_seeds():
    native_cfg = f_int(1, 1) + f_int(2, 16000) + f_bytes(3, "en-US") + f_int(4, 2) + f_int(8, 1)
    pcm = tone(320)
    write("streaming_request", "native_linear16",
          messages(0, first(native_cfg, f_int(3, 1)), audio(pcm[:320]), audio(pcm[320:])))
    write("streaming_request", "native_mulaw_8k",
          messages(0, first(f_int(1, 3) + f_int(2, 8000)), audio(bytes(range(0, 256, 3)))))
    write("streaming_request", "native_alaw_48k",
          messages(0, first(f_int(1, 20) + f_int(2, 48000) + f_int(7, 1)),
                   audio(bytes(range(200)))))
    contexts = (f_bytes(6, f_bytes(1, "the cat") + f_bytes(1, "hello world") + f_float(4, 5.0)) +
                f_bytes(20, f_int(2, 500) + f_int(3, 2000) + f_int(4, 20000) +
                        f_float(5, 0.9)))
    write("streaming_request", "native_contexts_endpointing",
          messages(0, first(contexts, f_int(2, 1)), audio(pcm[:200])))
    write("streaming_request", "native_defaults", messages(0, first(b""), audio(pcm[:64])))
    write("streaming_request", "native_config_twice",
          messages(0, first(b""), audio(pcm[:64]), first(b"")))
    riva_cfg = (f_int(1, 1) + f_int(2, 16000) + f_bytes(3, "en-US") + f_int(4, 1) +
                f_bytes(6, f_bytes(1, "cat") + f_float(4, 4.0)) + f_bytes(25, f_int(3, 800)))
    write("streaming_request", "riva_linear_pcm",
          messages(1, first(riva_cfg, f_int(2, 1)) + f_bytes(100, f_bytes(1, "req-1")),
                   audio(pcm[:320])))
    write("streaming_request", "riva_alaw", messages(1, first(f_int(1, 20) + f_int(2, 8000)),
                                                     audio(bytes(range(100)))))
    google_cfg = (f_int(1, 1) + f_int(2, 16000) + f_bytes(3, "en-us") + f_int(8, 1) +
                  f_bytes(6, f_bytes(1, "the") + f_float(4, -1.0)))
    write("streaming_request", "google_linear16",
          messages(2, first(google_cfg, f_int(2, 1) + f_int(3, 1)), audio(pcm[:320])))
    write("streaming_request", "google_mulaw",
          messages(2, first(f_int(1, 3) + f_int(2, 8000)), audio(bytes(range(120)))))


def main():
    for target in ("audio_codec", "wav_file", "model_json", "safetensors", "units", "arpa",
                   "streaming_request"):
        d = os.path.join(CORPUS, target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    audio_seeds()
    model_seeds()
    request_seeds()


if __name__ == "__main__":
    main()
