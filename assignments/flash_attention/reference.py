"""Grading data for the flash_attention assignment that is code rather than numbers.

The grader imports this module and calls the functions that assignment.toml names for each part:
the input generators (q, k, v of shape (B, H, N, D), and the output gradient for the backward
part, with the ``causal`` flag), the float64 references, the torch baselines the student is timed
against (SDPA with its flash backend), and the bytes and FLOPs that place a timing on the
roofline. Nothing here is shipped as a solution: it only describes the problem.

Each of these functions is a top-level `def`, named in assignment.toml or, where a part names
none, called `<part>_inputs`, `<part>_reference`, `<part>_baseline` or `<part>_traffic` (a CUDA C
part's also `<part>_arguments`, `<part>_output_shape`); loading assignment.toml checks each exists.
"""

import math

import torch

# Query rows scaled up by this much (one row in LOUD_EVERY, and always the first): their scores
# reach 100 and more, so exp() of an unshifted score overflows float32, and their softmax is
# nearly one-hot; the other rows spread their weight over many keys.
LOUD = 24.0
LOUD_EVERY = 16
# Scores of the float64 reference are formed for this many (batch, head) pairs at a time, so
# the N x N matrices of a long sequence stay within a few GB of memory.
REFERENCE_ELEMENTS = 2**28


def _attention_tensors(shape, dtype, layout, generator, device, names):
    """``0.5 + randn`` for each name, with the loud query rows planted in q."""
    if layout != "contiguous":
        raise ValueError(f"flash_attention has only the contiguous layout, not {layout!r}")
    if len(shape) != 4:
        raise ValueError(f"flash_attention shapes are (B, H, N, D), got {shape}")
    made = {name: 0.5 + torch.randn(shape, generator=generator, device=device) for name in names}
    n = shape[2]
    loud = torch.rand(shape[:3], generator=generator, device=device) < 1.0 / LOUD_EVERY
    loud[:, :, 0] = True
    made["q"] = torch.where(loud[..., None], LOUD * made["q"], made["q"])
    if n > 1:
        made["q"][:, :, -1] = made["q"][:, :, -1] / LOUD  # the last row quiet: its weights spread wide
    return {name: t.to(dtype) for name, t in made.items()}


def attention_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``flash_attention(q, k, v)``: each ``0.5 + randn`` of shape (B, H, N, D)."""
    return {**_attention_tensors(shape, dtype, layout, generator, device, ("q", "k", "v")), "causal": False}


def causal_attention_inputs(shape, dtype, layout, generator, device):
    """As ``attention_inputs``, with ``causal=True``."""
    return {**attention_inputs(shape, dtype, layout, generator, device), "causal": True}


def attention_grad_inputs(shape, dtype, layout, generator, device):
    """Keyword arguments for ``flash_attention_backward(q, k, v, do)``: do is the gradient of the
    loss with respect to the output, ``0.5 + randn`` like the others."""
    names = ("q", "k", "v", "do")
    return {**_attention_tensors(shape, dtype, layout, generator, device, names), "causal": False}


def causal_attention_grad_inputs(shape, dtype, layout, generator, device):
    """As ``attention_grad_inputs``, with ``causal=True``."""
    return {**attention_grad_inputs(shape, dtype, layout, generator, device), "causal": True}


def _chunks(q):
    """Slices of the flattened (batch x head) axis small enough for the N x N scores."""
    b, h, n, _ = q.shape
    step = max(1, REFERENCE_ELEMENTS // (n * n))
    return [slice(i, i + step) for i in range(0, b * h, step)]


def _attention(q, k, v, causal):
    """softmax(q k^T / sqrt(D)) v over flattened (batch x head) rows, causal or not."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_reference(q, k, v, causal):
    """Attention with scale 1/sqrt(D); the grader passes q, k, v upcast to float64."""
    b, h, n, d = q.shape
    flat = [t.reshape(b * h, n, d) for t in (q, k, v)]
    out = torch.empty_like(flat[0])
    for rows in _chunks(q):
        out[rows] = _attention(*(t[rows] for t in flat), causal)
    return out.reshape(b, h, n, d)


def attention_grad_reference(q, k, v, do, causal):
    """(dq, dk, dv) of ``sum(attention(q, k, v) * do)``, stacked into one (3, B, H, N, D) tensor:
    float64 autograd of the reference above."""
    b, h, n, d = q.shape
    flat = [t.reshape(b * h, n, d) for t in (q, k, v, do)]
    grads = torch.empty((3, b * h, n, d), dtype=q.dtype, device=q.device)
    with torch.enable_grad():
        for rows in _chunks(q):
            leaves = [t[rows].detach().requires_grad_() for t in flat[:3]]
            out = _attention(*leaves, causal)
            grads[:, rows] = torch.stack(torch.autograd.grad(out, leaves, flat[3][rows]))
    return grads.reshape(3, b, h, n, d)


def _flash_backend():
    """SDPA restricted to its flash backend: the baseline the assignment's targets are set against."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.FLASH_ATTENTION)


def attention_baseline(q, k, v, causal):
    """What the forward is timed against: torch's SDPA with the flash backend, in the input's dtype."""
    with _flash_backend():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def attention_grad_baseline(q, k, v, do, causal):
    """What the backward part is timed against: SDPA's flash forward and backward, as the part's
    entry point runs its own forward before its backward kernels."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad(), _flash_backend():
        out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
        return torch.autograd.grad(out, leaves, do)


def _pairs(q, causal):
    """(query, key) pairs attended: N^2 per head, about half of it when causal."""
    b, h, n, _ = q.shape
    return b * h * (n * (n + 1) // 2 if causal else n * n)


def attention_traffic(q, k, v, causal):
    """Fewest bytes: one read of q, k and v, one write of the output. FLOPs: two products of
    2 N^2 D each (q k^T, then P v) per head, over the pairs attended."""
    nbytes = 4 * q.numel() * q.element_size()
    return {"bytes": nbytes, "flops": 4 * _pairs(q, causal) * q.shape[-1]}


def attention_grad_traffic(q, k, v, do, causal):
    """Fewest bytes: reads of q, k, v and do, writes of dq, dk and dv. FLOPs: the forward's two
    products, then the backward's five (q k^T again, dv, dp, dq, dk), 2 N^2 D each."""
    nbytes = 7 * q.numel() * q.element_size()
    return {"bytes": nbytes, "flops": 14 * _pairs(q, causal) * q.shape[-1]}
