# Hostile: replaces json's default encoder with one that empties the list of torch ops in every
# message, so the harness would sign a report that never mentions the torch.add doing the work.
import json

import torch
import triton
import triton.language as tl


class Forger(json.JSONEncoder):
    def encode(self, o):
        for body in (o.get("body"),) if isinstance(o, dict) else ():
            for holder in (body, body.get("outcome")) if isinstance(body, dict) else ():
                if isinstance(holder, dict) and isinstance(holder.get("activity"), dict):
                    holder["activity"]["ops"] = []
        return super().encode(o)


json._default_encoder = Forger()
json.JSONEncoder = Forger


@triton.jit
def nothing_kernel(out_ptr):
    pass


def add(x, y):
    out = torch.empty_like(x)
    nothing_kernel[(1,)](out)
    torch.add(x, y, out=out)
    return out
