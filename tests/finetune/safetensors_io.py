"""A safetensors writer in a few lines (the format: 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range, then the raw little-endian data), so the tests need no extra
package. Writes what the `safetensors` package's save_file writes for float32/float16/bfloat16/int64 tensors."""
import json
import struct

import torch

_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def save(tensors, path):
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the reference writer does it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
