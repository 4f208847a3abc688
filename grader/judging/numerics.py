"""Judging one output against the grader's own float64 reference.

The checks run in a fixed order, so each wrong output earns the reason that names its first
problem: not a tensor, wrong shape, wrong dtype, inputs modified, stores outside the output,
elements never written (still poison), NaN or Inf, then the tolerance, checked both norm-wise
(||out - ref|| / ||ref||) and elementwise (|out - ref| <= atol + rtol |ref| for every element).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from grader.judging import locate, poison
from grader.assignment.spec import Tolerance


@dataclass
class Verdict:
    reason: str
    message: str
    metrics: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.reason == "ok"


def allowed(ref: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """The largest absolute error each element may have: atol + rtol * |ref|."""
    return tol.atol + tol.rtol * ref.abs()


def errors(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> dict:
    """Error measures of a finite output in float64, and the mask of elements out of tolerance."""
    actual = out.to(torch.float64)
    diff = (actual - ref).abs()
    bad = diff > allowed(ref, tol)
    ref_norm = torch.linalg.vector_norm(ref).item()
    return {
        "max_abs_error": diff.max().item() if diff.numel() else 0.0,
        "relative_error": torch.linalg.vector_norm(diff).item() / max(ref_norm, 1e-300),
        "bad_share": bad.float().mean().item() if bad.numel() else 0.0,
        "bad": bad,
        "diff": diff,
    }


def _where(out: torch.Tensor, ref: torch.Tensor, bad: torch.Tensor, diff: torch.Tensor) -> dict:
    where = locate.bad_map(bad)
    where["worst"] = locate.worst(out, ref, diff)
    return where


def judge(
    out: object,
    ref: torch.Tensor,
    dtype: torch.dtype,
    tol: Tolerance,
    modified_inputs: list[str] = (),
    overrun: int = 0,
) -> Verdict:
    """The verdict on one output; `ref` is float64 and already on the output's device."""
    if not isinstance(out, torch.Tensor):
        return Verdict("wrong_result", f"returned {type(out).__name__}, expected a torch.Tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Verdict(
            "wrong_shape",
            f"output shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
            {"shape": list(out.shape), "expected_shape": list(ref.shape)},
        )
    if out.dtype != dtype:
        return Verdict("wrong_dtype", f"output dtype {out.dtype}, expected {dtype} (the input's dtype)")
    if modified_inputs:
        names = ", ".join(modified_inputs)
        return Verdict("input_modified", f"the call changed its input(s) {names}; inputs are read-only")
    if overrun:
        return Verdict(
            "wrong_result",
            f"{overrun} element(s) were stored outside the output tensor's memory: check the store mask",
            {"overrun": overrun},
        )
    out = out.to(ref.device)
    unwritten = poison.is_poison(out)
    if unwritten.any():
        where = locate.bad_map(unwritten)
        message = f"{int(unwritten.sum())} of {out.numel()} elements were never written ({locate.describe(where)})"
        return Verdict("unwritten_output", message, {"unwritten": int(unwritten.sum()), "where": where})
    nonfinite = ~torch.isfinite(out) & torch.isfinite(ref)
    if nonfinite.any():
        where = locate.bad_map(nonfinite)
        message = f"{int(nonfinite.sum())} elements are NaN or Inf where the reference is finite ({locate.describe(where)})"
        return Verdict("nan_or_inf", message, {"nonfinite": int(nonfinite.sum()), "where": where})
    measured = errors(out, ref, tol)
    bad, diff = measured.pop("bad"), measured.pop("diff")
    metrics = {**measured, "tolerance": vars(tol)}
    if measured["relative_error"] > tol.norm or bad.any():
        metrics["where"] = _where(out, ref, bad, diff)
        message = (
            f"max abs error {measured['max_abs_error']:.3g}, relative error {measured['relative_error']:.3g} "
            f"(allowed {tol.norm:g}), {measured['bad_share']:.2%} of elements outside "
            f"atol={tol.atol:g} + rtol={tol.rtol:g}*|ref|; {locate.describe(metrics['where'])}"
        )
        return Verdict("wrong_result", message, metrics)
    return Verdict("ok", f"max abs error {measured['max_abs_error']:.3g}, relative error {measured['relative_error']:.3g}", metrics)
