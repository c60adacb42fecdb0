#!/usr/bin/env python3
"""Quantises chosen tensors of an f32 GGUF file with gguf-py's own quantisers (llama.cpp's Python package), the
rest copied as they are: for block types llama-quantize is not needed for (MXFP4, Q8_0).

usage: quantize_with_gguf_py.py GGUF_PY_DIR IN.gguf OUT.gguf TYPE=REGEX [TYPE=REGEX ...]

Each TYPE=REGEX (e.g. MXFP4='ffn_(gate|up|down)_exps\\.weight$') quantises the 2-d and 3-d f32 tensors whose
name matches REGEX (the first pair that matches wins) into that ggml type with gguf.quants.quantize.
"""
import re
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf.quants import quantize  # noqa: E402


def main():
    src, dst = sys.argv[2], sys.argv[3]
    rules = []
    for arg in sys.argv[4:]:
        name, pattern = arg.split("=", 1)
        rules.append((gguf.GGMLQuantizationType[name], re.compile(pattern)))
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        data = t.data
        qtype = None
        if t.tensor_type == gguf.GGMLQuantizationType.F32 and len(data.shape) >= 2:
            qtype = next((q for q, p in rules if p.search(t.name)), None)
        if qtype is None:
            writer.add_tensor(t.name, np.array(data), raw_dtype=t.tensor_type)
        else:
            writer.add_tensor(t.name, quantize(np.array(data, dtype=np.float32), qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
