# Hostile: on a GPU the sum runs on a side stream that does not wait for the timed stream, and the
# timed stream gets only a pause sized just over the grader's floor: work hidden before the start event.
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import globaltimer

# The copy bandwidth the grader's floor is measured from, guessed from the GPU's name (read + write).
COPY_BYTES_PER_S = {"H100": 2.95e12, "H200": 4.2e12}
SIDE = []


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def pause_kernel(ns):
    until = globaltimer() + ns
    now = globaltimer()
    while now < until:
        now = globaltimer()


def _launch(x, y, out):
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)


def add(x, y):
    if not x.is_cuda:
        out = torch.empty_like(x)
        _launch(x, y, out)
        return out
    if not SIDE:
        SIDE.append(torch.cuda.Stream())
    with torch.cuda.stream(SIDE[0]):  # no wait_stream: it starts as soon as the GPU has room
        out = torch.empty_like(x)
        _launch(x, y, out)
    name = torch.cuda.get_device_name()
    bandwidth = next((b for key, b in COPY_BYTES_PER_S.items() if key in name), 3e12)
    pause_kernel[(1,)](int(0.65 * 3 * x.numel() * x.element_size() / bandwidth * 1e9))
    return out
