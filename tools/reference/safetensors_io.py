"""A small safetensors reader/writer (8-byte little-endian header length,
JSON header, raw little-endian data), so the tools need no extra package."""

import hashlib
import json
import os
import struct

import torch

_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32"}
_TORCH = {v: k for k, v in _DTYPES.items()}


def save(tensors: dict, path: str, metadata: dict = None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_bytes(path: str) -> bytes:
    """The bytes of path, or, when it does not exist, of its parts
    path.part00, path.part01, ... concatenated (as the C++ reader does; the
    bundled model is split to keep files under 16 MiB), checked against
    path.sha256 when that file is there."""
    if os.path.exists(path) or not os.path.exists(path + ".part00"):
        with open(path, "rb") as f:
            return f.read()
    chunks = []
    while os.path.exists(f"{path}.part{len(chunks):02d}"):
        with open(f"{path}.part{len(chunks):02d}", "rb") as f:
            chunks.append(f.read())
    data = b"".join(chunks)
    if os.path.exists(path + ".sha256"):
        with open(path + ".sha256", encoding="utf-8") as f:
            expected = f.read().split()[0]
        if hashlib.sha256(data).hexdigest() != expected:
            raise ValueError(f"{path}: the {len(chunks)} parts do not match {path}.sha256")
    return data


def load(path: str) -> dict:
    data = read_bytes(path)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[base + begin : base + end])
        t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.zeros(0, dtype=torch.uint8)
        out[name] = t.view(_TORCH[info["dtype"]]).reshape(info["shape"])
    return out
