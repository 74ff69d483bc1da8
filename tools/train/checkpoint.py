"""Training checkpoints split into files of at most a given size.

Files coming back from the GPU machine may be at most 16 MiB each, so a
checkpoint (model, optimizer, step, elapsed time) is stored as a folder of
torch.save parts, each holding tensor pieces up to `max_bytes`, plus a
skeleton (the nested structure with tensors replaced by keys). Large tensors
are split along their flattened storage.

Also splits and joins a file's bytes (model.safetensors of the exported
model, 40 MB in float16) into parts: `python3 -m tools.train.checkpoint join
OUT_FILE PART...` reassembles and checks the recorded SHA-256.
"""

import hashlib
import json
import os
import shutil
import sys

import torch

MAX_BYTES = 15 * 1024 * 1024  # leaves room for torch.save's own framing


def _flatten(obj, tensors):
    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().cpu()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        return {"__dict__": [(k, _flatten(v, tensors)) for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [_flatten(v, tensors) for v in obj], "tuple": isinstance(obj, tuple)}
    return obj


def _unflatten(obj, tensors):
    if isinstance(obj, dict) and "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if isinstance(obj, dict) and "__dict__" in obj:
        return {k: _unflatten(v, tensors) for k, v in obj["__dict__"]}
    if isinstance(obj, dict) and "__list__" in obj:
        items = [_unflatten(v, tensors) for v in obj["__list__"]]
        return tuple(items) if obj["tuple"] else items
    return obj


def save(state, directory: str, max_bytes: int = MAX_BYTES):
    """Writes `state` (nested dicts/lists of tensors and plain values) to
    `directory` atomically (a temporary folder renamed into place)."""
    tensors = {}
    skeleton = _flatten(state, tensors)
    tmp = directory + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    parts, current, size = [], {}, 0
    layout = {}
    for key, t in tensors.items():
        flat = t.contiguous().view(-1)
        per = max(1, max_bytes // max(t.element_size(), 1))
        pieces = list(flat.split(per)) if flat.numel() else [flat]
        layout[key] = {"shape": list(t.shape), "pieces": []}
        for i, piece in enumerate(pieces):
            nbytes = piece.numel() * piece.element_size()
            if current and size + nbytes > max_bytes:
                parts.append(current)
                current, size = {}, 0
            name = f"{key}.{i}"
            current[name] = piece.clone()
            size += nbytes
            layout[key]["pieces"].append([len(parts), name])
    if current or not parts:
        parts.append(current)
    for i, part in enumerate(parts):
        torch.save(part, os.path.join(tmp, f"part{i:03d}.pt"))
    torch.save({"skeleton": skeleton, "layout": layout, "parts": len(parts)},
               os.path.join(tmp, "index.pt"))
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(tmp, directory)


def load(directory: str):
    index = torch.load(os.path.join(directory, "index.pt"), weights_only=False)
    parts = [torch.load(os.path.join(directory, f"part{i:03d}.pt"), weights_only=True)
             for i in range(index["parts"])]
    tensors = {}
    for key, info in index["layout"].items():
        flat = torch.cat([parts[p][name] for p, name in info["pieces"]])
        tensors[key] = flat.view(info["shape"])
    return _unflatten(index["skeleton"], tensors)


def latest(root: str):
    """The newest complete checkpoint folder (step*) under root, or None."""
    if not os.path.isdir(root):
        return None
    steps = sorted((d for d in os.listdir(root)
                    if d.startswith("step") and not d.endswith(".tmp")
                    and os.path.exists(os.path.join(root, d, "index.pt"))),
                   key=lambda d: int(d[4:]))
    return os.path.join(root, steps[-1]) if steps else None


def split_file(path: str, max_bytes: int = 16 * 1024 * 1024):
    """Splits path into path.partNN (each <= max_bytes) and path.sha256 when
    it is larger than max_bytes (removing path); returns the files now there."""
    size = os.path.getsize(path)
    if size <= max_bytes:
        return [path]
    with open(path, "rb") as f:
        data = f.read()
    out = []
    for i in range(0, size, max_bytes):
        name = f"{path}.part{i // max_bytes:02d}"
        with open(name, "wb") as g:
            g.write(data[i:i + max_bytes])
        out.append(name)
    with open(path + ".sha256", "w", encoding="utf-8") as f:
        f.write(hashlib.sha256(data).hexdigest() + "\n")
    os.remove(path)
    return out + [path + ".sha256"]


def join_file(out_path: str, parts, sha256: str = None):
    """Concatenates parts (in order) into out_path; checks the SHA-256."""
    h = hashlib.sha256()
    with open(out_path + ".tmp", "wb") as g:
        for p in parts:
            with open(p, "rb") as f:
                data = f.read()
            h.update(data)
            g.write(data)
    if sha256 and h.hexdigest() != sha256:
        os.remove(out_path + ".tmp")
        raise ValueError(f"{out_path}: SHA-256 {h.hexdigest()} != expected {sha256}")
    os.replace(out_path + ".tmp", out_path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[0] != "join":
        sys.exit("usage: python3 -m tools.train.checkpoint join OUT_FILE PART... "
                 "(checks OUT_FILE.sha256 when present)")
    out, parts = argv[1], sorted(argv[2:])
    sha = None
    if os.path.exists(out + ".sha256"):
        with open(out + ".sha256", encoding="utf-8") as f:
            sha = f.read().strip()
    join_file(out, parts, sha)
    print(json.dumps({"joined": out, "parts": len(parts), "sha256_checked": sha is not None}))


if __name__ == "__main__":
    main()
