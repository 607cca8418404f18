"""Reads a safetensors file from the format's description alone (8-byte
little-endian header length, JSON header, raw little-endian data) with numpy,
and prints what it found: one line per tensor, `name shape count first last sum`
(values as exact Python floats), then one line per metadata entry. Given a
checkpoint's step directory, it reads manifest.json (format version 2), checks
the SHA-256, size and tensor count of every file it lists, and prints the
tensors of all of them, then `manifest KEY=VALUE` lines (files as "a,b"). Run with Debian's /usr/bin/python3 (python3-numpy)."""
import hashlib
import json
import os
import struct
import sys

import numpy as np


def main(path):
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            read_file(f.read())
        return
    with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["format"] == "bamboo-checkpoint" and manifest["version"] == 2, manifest
    for entry in manifest["files"]:
        with open(os.path.join(path, entry["name"]), "rb") as f:
            raw = f.read()
        assert hashlib.sha256(raw).hexdigest() == entry["sha256"], entry
        assert len(raw) == entry["bytes"], entry
        assert read_file(raw) == entry["tensors"], entry
    manifest["files"] = ",".join(e["name"] for e in manifest["files"])
    for k, v in sorted(manifest.items()):
        print(f"manifest {k}={v}")


def read_file(raw):
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n].decode("ascii"))
    data = raw[8 + n :]
    meta = header.pop("__metadata__", {})
    for name, t in header.items():
        assert t["dtype"] == "F32", t
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype="<f4").reshape(t["shape"])
        flat = a.reshape(-1).astype(np.float64)
        shape = "x".join(str(d) for d in t["shape"])
        print(f"{name} {shape} {a.size} {flat[0]!r} {flat[-1]!r} {flat.sum()!r}")
    for k, v in sorted(meta.items()):
        print(f"meta {k}={v}")
    return len(header)


if __name__ == "__main__":
    main(sys.argv[1])
