"""A safetensors file as a PyTorch state_dict, read with json and numpy (no safetensors package needed): the
CLI tests load what `snug train --save` wrote back into the PyTorch module that was exported."""
import json
import struct

import numpy as np


def load(path):
    """(state, metadata): per tensor name a torch tensor of the file's dtype and shape, and the header's
    __metadata__."""
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "I64": np.int64}
    state = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        state[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=dtypes[t["dtype"]]).reshape(t["shape"]).copy())
    return state, header.get("__metadata__", {})
