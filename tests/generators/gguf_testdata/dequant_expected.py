#!/usr/bin/python3
"""Writes what gguf-py's own numpy dequantiser (gguf.quants.dequantize) makes of every quantised tensor of a
GGUF file, for the importer's tests.

usage: dequant_expected.py GGUF_PY_DIR FILE.gguf OUT.json

Per tensor of type Q8_0, Q4_0, Q4_K, Q5_K, Q6_K or MXFP4: its name, ggml type name, ne (ggml order), the
dequantised f32 values of its first and last rows (exact: each float32 is written as the shortest decimal that
reads back to it), the float64 sum and sum of squares over all its values, and the SHA-256 of all its values as
little-endian float32 in ggml order (rows of ne[0] values, then ne[1], ne[2]): every value, bit for bit.
"""
import hashlib
import json
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType, GGUFReader  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

QUANTISED = {GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q5_K,
             GGMLQuantizationType.Q6_K, GGMLQuantizationType.MXFP4}


def row_values(row):
    return [float(repr(np.float32(x))) for x in row]


def main():
    reader = GGUFReader(sys.argv[2])
    tensors = []
    for t in reader.tensors:
        if t.tensor_type not in QUANTISED:
            continue
        values = dequantize(t.data, t.tensor_type).astype(np.float32)
        rows = values.reshape(-1, int(t.shape[0]))  # t.shape is ne: innermost first
        tensors.append({
            "name": t.name,
            "type": t.tensor_type.name.lower(),
            "ne": [int(x) for x in t.shape],
            "first_row": row_values(rows[0]),
            "last_row": row_values(rows[-1]),
            "sum": float(values.astype(np.float64).sum()),
            "sum_squares": float((values.astype(np.float64) ** 2).sum()),
            "sha256": hashlib.sha256(np.ascontiguousarray(values, dtype="<f4").tobytes()).hexdigest(),
        })
    doc = {"file": sys.argv[2].rsplit("/", 1)[-1], "expected_from": "gguf-py gguf.quants.dequantize (numpy %s)" % np.__version__,
           "tensors": tensors}
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
