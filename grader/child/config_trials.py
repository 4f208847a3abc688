"""The CPU tier's check of an autotuning: every config of one @triton.autotune kernel starts from
the same arguments, and each one's results must equal the first config's, bit for bit (a config
that leaves part of an output unwritten shows as the grader's NaN poison there). interpreter.py
puts this check in Triton's Autotuner."""

from __future__ import annotations

import numpy as np
import torch
from triton.runtime.errors import AutotunerError


class ConfigsDisagree(AutotunerError):
    """Two configs of one @triton.autotune kernel gave different results on the same arguments."""


class Trials:
    """The configs of one autotuning: the arguments they all start from, and the first one's results.

    Every copy and comparison here is numpy's, on numpy views of the tensors' memory: the only torch
    ops are views (detach, a same-size dtype view), so the profiler, which judges the student's call
    by the torch ops it ran, sees no work of the grader's inside it (a clone or an `abs` here would be
    counted as the student's, and a fused part would lose its points for the grader's copies)."""

    def __init__(self):
        self.start: dict[str, np.ndarray] | None = None
        self.first: tuple[object, dict[str, np.ndarray]] | None = None

    def begin(self, arguments: dict) -> None:
        """Each config starts from the arguments as the caller passed them (the grader's NaN
        poison included), so a config that leaves part of an output unwritten shows as NaN there
        instead of hiding behind the previous config's values. (After the last config nothing is
        restored: the final launch sees what it would see on the GPU.)"""
        tensors = tensors_of(arguments)
        if self.start is None:
            self.start = copies_of(tensors)
            return
        for name, tensor in tensors.items():
            memory, start = _memory(tensor), self.start[name]
            # Only what changed (compared bit for bit, NaN poison included): an input may be an
            # expanded view, whose elements share memory.
            if not np.array_equal(_bits(memory), _bits(start)):
                np.copyto(memory, start)

    def compare(self, tuner, config, results: dict[str, np.ndarray]) -> None:
        if not results:
            return  # the config was skipped (Triton found it does not fit)
        if self.first is None:
            self.first = (config, results)
            return
        first_config, first_results = self.first
        for name, expected in first_results.items():
            difference = _difference(expected, results[name])
            if difference:
                raise ConfigsDisagree(_disagreement(tuner, first_config, config, name, difference))


def tensors_of(arguments: dict) -> dict[str, torch.Tensor]:
    found = {}
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif isinstance(getattr(value, "base", None), torch.Tensor):  # a host-side TensorDescriptor
            found[f"{name}.base"] = value.base
    return found


# numpy has no bfloat16 or float8: their memory is read as integers of the same size, and
# bfloat16's widened to float32 (its top 16 bits) for comparing values.
_NO_NUMPY = {torch.bfloat16: torch.int16, **{d: torch.uint8 for d in (
    getattr(torch, n, None) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")) if d}}


def _memory(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array over the tensor's own memory (writes go through), with torch views only."""
    plain = tensor.detach()
    if plain.dtype in _NO_NUMPY:
        plain = plain.view(_NO_NUMPY[plain.dtype])
    return plain.numpy()


def copies_of(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {name: _Copy(_memory(t), t.dtype) for name, t in tensors.items()}


class _Copy(np.ndarray):
    """A copy of a tensor's memory that remembers the tensor's dtype."""

    def __new__(cls, memory: np.ndarray, dtype: torch.dtype):
        copy = np.array(memory, copy=True).view(cls)
        copy.torch_dtype = dtype
        return copy

    def __array_finalize__(self, source) -> None:
        self.torch_dtype = getattr(source, "torch_dtype", None)


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.itemsize in (1, 2, 4, 8) else array


def _values(copy: _Copy) -> np.ndarray | None:
    """float64 values of a floating copy; None for other dtypes (and float8, compared bit for bit)."""
    if copy.torch_dtype == torch.bfloat16:
        return (np.asarray(copy).view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if copy.torch_dtype is not None and copy.torch_dtype.is_floating_point and copy.torch_dtype not in _NO_NUMPY:
        return np.asarray(copy, dtype=np.float64)
    return None


def _difference(expected: _Copy, actual: _Copy) -> str:
    """How `actual` differs from `expected`, in words; '' when they agree. Floats agree within a
    loose tolerance (1% of the tensor's largest value, plus 1%): configs only reorder sums, while a
    tiling bug is wrong by the size of the values. NaN and Inf must sit in the same places."""
    want, got = _values(expected), _values(actual)
    if want is None or got is None:
        bad = _bits(np.asarray(expected)) != _bits(np.asarray(actual))
        return f"{int(bad.sum())} of {bad.size} elements differ" + _first_index(bad) if bad.any() else ""
    nan = np.isnan(want) != np.isnan(got)
    if nan.any():
        return (f"NaN in {int(np.isnan(want).sum())} elements for one and {int(np.isnan(got).sum())} "
                f"for the other" + _first_index(nan))  # fmt: skip
    finite = np.isfinite(want) & np.isfinite(got)
    scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        gap = np.where(finite, np.abs(want - got), 0.0)
    bad = (gap > 1e-2 * scale + 1e-2 * np.abs(np.where(finite, want, 0.0))) | (~finite & ~np.isnan(want) & (want != got))
    if not bad.any():
        return ""
    return (f"{int(bad.sum())} of {bad.size} elements differ, by up to {float(gap.max()):.3g} "
            f"(largest value {scale:.3g})" + _first_index(bad))  # fmt: skip


def _first_index(bad: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return f", first at index {index if len(index) > 1 else index[0]}"


def config_named(tuner, config) -> str:
    settings = [f"{k}={v}" for k, v in config.kwargs.items()]
    settings += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    settings += [f"num_ctas={config.num_ctas}"] if config.num_ctas != 1 else []
    settings += [f"maxnreg={config.maxnreg}"] if config.maxnreg is not None else []
    number = tuner.configs.index(config) if config in tuner.configs else "?"
    return f"config {number} ({', '.join(settings)})"


def _disagreement(tuner, first, other, name: str, difference: str) -> str:
    return (
        f"@triton.autotune of `{tuner.base_fn.__name__}`: {config_named(tuner, other)} and "
        f"{config_named(tuner, first)} give different results on the same arguments: `{name}`: {difference}. "
        "On the GPU the autotuner may pick either config, so each must be right: look for a mask, "
        "loop bound or offset that only holds for some block sizes. If the kernel adds into an "
        "argument (atomics, +=), name it in reset_to_zero= (or restore_value=), so that every config "
        "starts from the same values."
    )
