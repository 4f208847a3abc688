"""Likely causes of a wrong output, named only where the evidence fits.

A failed case already says how wrong the output is and where (numerics.py, locate.py). Some
bugs leave a signature the grader can test against the very inputs the student received, and
then the report can name the cause and the fix:

- `tf32`: a float32 output that the reference, recomputed from inputs rounded to TF32 (10
  mantissa bits, as an NVIDIA tensor core multiplies float32 by default), explains far better
  than the exact one: `tl.dot` without `input_precision="ieee"`.
- `rounded`: a float32 output whose every value is a bfloat16 (or float16) value, where the
  reference's are not: something rounded to the narrow type on the way.
- `transposed`: the output matches the reference transposed (square) or holds its values in
  transposed order (the output's strides swapped).
- `overflow`: non-finite elements exactly where an input is largest (elementwise, or by the
  row's largest |x|): all of them at 8 or more, and nearly all elements past the smallest such
  value wrong too, as an exp past its range makes them (a row-wise Softmax without max
  subtraction overflows past 88.7, a tanh written with exp(2y) of a GELU's cubic past x ~ 10).
  A bug that breaks a row by its position (a causal mask's first row) is not an overflow even
  where that row's inputs happen to be large.
- `poison_read`: every non-finite element is NaN, some of them where no input is large: the
  grader fills new memory and the guard cells around each tensor with NaN, and a kernel that
  reads its output before writing it (`beta * C` with beta = 0) or reads past an input's end
  (a missing load mask) turns that NaN into its result.

- `last_block`: only the last block of rows or columns is wrong (a stretch from a multiple of
  a power of two to the end, shorter than it): a mask, off by one or missing.
- `reduction`: every wrong row is the reference's row times one factor, a different one per
  row: the row's elementwise work is right and its reduction (a sum, a max) is not, as when
  masked-off lanes are loaded as 0 and counted, or a looped row folds in only some blocks.

Each test runs only on a failed case. tests/test_diagnosis.py shows each on its signature and
none on right outputs; each known-wrong submission's expect.toml names the diagnosis it earns
(`diagnosis`), and test_wrong_submissions.py fails on any other.
"""

from __future__ import annotations

from typing import Callable

import torch

from grader.judging import locate, numerics
from grader.assignment.spec import Tolerance

EXPLAINS = 0.2  # the alternative reference must cut the error at least five-fold


def _relative(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = torch.linalg.vector_norm(out.to(torch.float64) - ref).item()
    return diff / max(torch.linalg.vector_norm(ref).item(), 1e-300)


def round_to_tf32(tensor: torch.Tensor, nearest: bool = True) -> torch.Tensor:
    """float32 values kept to TF32's 10 mantissa bits: rounded to nearest (ties away from zero,
    as cvt.rna.tf32.f32 does) or truncated (a tensor core fed float32 ignores the low bits)."""
    bits = tensor.to(torch.float32).contiguous().view(torch.int32)
    kept = (((bits + 0x1000) if nearest else bits) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(tensor), kept, tensor.to(torch.float32))


def tf32(out: torch.Tensor, ref: torch.Tensor, inputs: dict, reference: Callable[[dict], torch.Tensor]) -> str | None:
    float32_inputs = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor) and v.dtype == torch.float32}
    if out.dtype != torch.float32 or not float32_inputs:
        return None
    exact = _relative(out, ref)
    for nearest in (True, False):
        as_tf32 = reference({**inputs, **{k: round_to_tf32(v, nearest) for k, v in float32_inputs.items()}})
        if _relative(out, as_tf32) <= EXPLAINS * exact:
            break
    else:
        return None
    return ("the output matches the reference computed from inputs rounded to TF32 (10 of float32's 23 mantissa bits): "
            "on an NVIDIA GPU a float32 tl.dot multiplies in TF32 unless asked not to; pass input_precision=\"ieee\" "
            "to tl.dot")  # fmt: skip


def rounded(out: torch.Tensor, ref: torch.Tensor) -> str | None:
    if out.dtype != torch.float32 or out.numel() < 16:
        return None
    for narrow, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        if not torch.equal(out, out.to(narrow).to(torch.float32)):
            continue
        representable = (ref == ref.to(narrow).to(torch.float64)).double().mean().item()
        if representable < 0.5:
            return (f"every value of the float32 output is a {name} value, where most of the reference's are not: "
                    f"something rounded to {name} on the way (a cast, a load, tl.dot's output type, the dtype of an "
                    "accumulator); keep float32 until the store")  # fmt: skip
    return None


def transposed(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> str | None:
    if ref.dim() < 2 or ref.shape[-1] == 1 or ref.shape[-2] == 1:
        return None
    swapped = ref.mT  # the last two dimensions swapped
    if swapped.shape == ref.shape and _relative(out, swapped) <= tol.norm:
        return ("the output is the reference transposed: rows and columns swapped; check which index goes with "
                "which stride in the store (or the loads)")  # fmt: skip
    if _relative(out.reshape(-1), swapped.contiguous().reshape(-1)) <= tol.norm:
        return ("the output holds the right values in transposed order: element (i, j) was stored where (j, i) "
                "belongs, with the output's row and column strides swapped")  # fmt: skip
    return None


LARGE = 8.0  # an input this large can overflow an exp on the way (exp(2y) of GELU's cubic at ~10)
UPPER_SHARE = 0.9  # of the elements (rows) at or past the smallest that went non-finite, how many must have


def _measures(out: torch.Tensor, inputs: dict) -> list[tuple[torch.Tensor, bool]]:
    """How large the inputs are at each output element, one measure per way an input lines up
    with the output: an input of the same shape elementwise (x, -x and |x|: an exp overflows on
    one side), and one with as many rows by its row's largest |x| (a row-wise op such as Softmax).
    Each comes as (values over the output's rows x columns, or over its rows; whether per row)."""
    rows = out.reshape(-1, out.shape[-1]) if out.dim() else out.reshape(1, 1)
    found = []
    for value in inputs.values():
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or not value.dim():
            continue
        value = value.detach().to(rows.device, torch.float64)
        if value.shape == out.shape:
            flat = value.reshape(rows.shape)
            found += [(flat, False), (-flat, False), (flat.abs(), False)]
        if value.reshape(-1, value.shape[-1]).shape[0] == rows.shape[0]:
            found.append((value.abs().reshape(rows.shape[0], -1).amax(dim=1), True))
    return found


def _nonfinite(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    return (~torch.isfinite(out) & torch.isfinite(ref)).reshape(-1, out.shape[-1] if out.dim() else 1)


def _overflows_along(wrong: torch.Tensor, measure: torch.Tensor) -> bool:
    """Whether the wrong elements (or rows) are those where the measure is largest: every one at
    LARGE or more, and nearly every one at or past the smallest of them wrong too. An overflow
    starts at a threshold and spares nothing beyond it; a bug that hits a few large rows by their
    position (the first row of a causal mask, say) leaves larger ones right."""
    if not wrong.any():
        return False
    least = measure[wrong].min()
    upper = measure >= least
    return bool(least >= LARGE and (~upper).any() and wrong[upper].double().mean() >= UPPER_SHARE)


def _looks_like_overflow(out: torch.Tensor, ref: torch.Tensor, inputs: dict) -> bool:
    wrong = _nonfinite(out, ref)
    return any(_overflows_along(wrong.any(dim=1) if per_row else wrong, measure)
               for measure, per_row in _measures(out, inputs))  # fmt: skip


def _where_none_is_large(out: torch.Tensor, ref: torch.Tensor, inputs: dict) -> torch.Tensor | None:
    """The wrong elements at which no input that lines up with them reaches LARGE, or None where
    no input lines up (no evidence either way)."""
    measures = _measures(out, inputs)
    if not measures:
        return None
    wrong = _nonfinite(out, ref)
    for measure, per_row in measures:
        large = measure >= LARGE
        wrong = wrong & ~(large[:, None] if per_row else large)
    return wrong


def overflow(out: torch.Tensor, ref: torch.Tensor, inputs: dict) -> str | None:
    if not _looks_like_overflow(out, ref, inputs):
        return None
    return (f"NaN or Inf appear where the inputs are largest (from {LARGE:g} up), and nowhere else: an exp overflowed "
            "on the way (float32's exp does past 88.7). Keep its argument in range: subtract the row's maximum "
            "before exp, or write tanh through exp(-2|y|)")  # fmt: skip


def poison_read(out: torch.Tensor, ref: torch.Tensor, inputs: dict) -> str | None:
    wrong = _nonfinite(out, ref).reshape(out.shape)
    if not wrong.any() or torch.isinf(out[wrong]).any():
        return None
    quiet = _where_none_is_large(out, ref, inputs)
    if quiet is None or not quiet.any():
        return None  # NaN only where inputs are large: an overflow can end in NaN too (inf / inf)
    return ("every non-finite element is NaN, the value the grader fills new memory and the guard cells around each "
            "tensor with (an overflow would give Inf somewhere): the kernel read memory it never wrote, its output "
            "before writing it (0 * NaN is NaN, so `beta * C` with beta = 0 still reads C) or past the end of an "
            "input (a load without its mask)")  # fmt: skip


def _bad(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """The elements outside tolerance (or not finite), as rows x columns."""
    wide = out.to(torch.float64)
    close = torch.isfinite(wide) & ((wide - ref).abs() <= numerics.allowed(ref, tol))
    return locate.as_matrix(~close)


def last_block(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> str | None:
    bad = _bad(out, ref, tol)
    for mask, axis in ((bad.any(dim=1), "rows"), (bad.any(dim=0), "columns")):
        found = locate.last_block(mask)
        if found and mask.shape[0] > 1:
            first, block = found
            return (f"only the last block of {axis} is wrong (from {first}, a multiple of {block}): a mask that is "
                    "missing or off by one; compare offsets against the true length (offs < n), in both the load "
                    "and the store")  # fmt: skip
    return None


def reduction(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> str | None:
    rows_out, rows_ref = locate.as_matrix(out.to(torch.float64)), locate.as_matrix(ref)
    if rows_ref.shape[0] < 2 or rows_ref.shape[1] < 2:
        return None
    bad = _bad(out, ref, tol).any(dim=1) & (rows_ref.abs().amax(dim=1) > 0)
    if int(bad.sum()) < 2:
        return None
    got, want = rows_out[bad], rows_ref[bad]
    factor = (got * want).sum(dim=1) / (want * want).sum(dim=1)
    residual = torch.linalg.vector_norm(got - factor[:, None] * want, dim=1) / torch.linalg.vector_norm(want, dim=1)
    off = (factor - 1).abs()
    fits = bool((residual <= tol.norm).all() and (off > 10 * tol.norm).all())
    if not fits or (factor.max() - factor.min()).item() <= 1e-3 * factor.abs().max().item():
        return None  # one factor for every row is a wrong constant, not a reduction
    return (f"each of the {int(bad.sum())} wrong rows is the right row times one factor ({factor.min().item():.4g} to "
            f"{factor.max().item():.4g}), a different one per row: the elementwise work is right and the row's "
            "reduction (its sum or max) is not; lanes masked off must not count (load them as -inf for a max, 0 for "
            "a sum of exps), and a row looped over blocks must fold every block in")  # fmt: skip


def diagnose(reason: str, out: object, ref: torch.Tensor, tol: Tolerance, inputs: dict,
             reference: Callable[[dict], torch.Tensor]) -> tuple[str, str] | None:  # fmt: skip
    """(name, sentence) for the first cause whose evidence fits a failed case, or None."""
    if not isinstance(out, torch.Tensor) or out.is_meta or tuple(out.shape) != tuple(ref.shape):
        return None
    out = out.to(ref.device)
    if reason == "nan_or_inf":
        for name, test in (("overflow", overflow), ("poison_read", poison_read)):
            found = test(out, ref, inputs)
            if found:
                return name, found
        return None
    if reason != "wrong_result" or not torch.isfinite(out).all():
        return None
    with torch.no_grad():
        for name, test in (("transposed", lambda: transposed(out, ref, tol)), ("rounded", lambda: rounded(out, ref)),
                           ("reduction", lambda: reduction(out, ref, tol)), ("last_block", lambda: last_block(out, ref, tol)),
                           ("tf32", lambda: tf32(out, ref, inputs, reference))):  # fmt: skip
            found = test()
            if found:
                return name, found
    return None
