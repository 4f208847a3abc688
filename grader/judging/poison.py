"""Poisoned memory: how the grader sees which output elements a kernel never wrote.

Every tensor the student allocates during a graded call is filled with a signalling-NaN bit
pattern that no arithmetic produces (arithmetic turns NaN into the canonical quiet NaN), so an
element that still holds the exact pattern was never stored to. Each allocation, and each input
handed to the student, also sits inside a larger buffer with guard cells before and after it:
a store past the end of the output (a missing tail mask) lands in the guard and is counted.
"""

from __future__ import annotations

import torch

# One signalling NaN per float width: exponent all ones, quiet bit clear, a recognisable payload.
_PATTERNS = {
    torch.float64: (torch.int64, 0x7FF4A5A5A5A5A5A5),
    torch.float32: (torch.int32, 0x7FA5A5A5),
    torch.float16: (torch.int16, 0x7D5A),
    torch.bfloat16: (torch.int16, 0x7FA5),
}
_INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _int_pattern(size: int) -> int:
    """0xA5 in every byte, as the signed integer of that many bytes: integer and bool tensors are
    poisoned too (a uint8 mask the student allocates), and a one-byte pattern must fit a byte."""
    return int.from_bytes(b"\xa5" * size, "little") - (1 << (8 * size))


FRONT_BYTES = 512  # keeps the guarded view 512-byte aligned, as a fresh allocation would be
BACK_ELEMENTS = 8192  # room for a whole unmasked block written past the end


def _bits(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The tensor's raw bits as integers, and the poison pattern in the same integer type."""
    size = tensor.element_size()
    int_dtype, pattern = _PATTERNS.get(tensor.dtype, (_INT_OF_SIZE[size], _int_pattern(size)))
    return tensor.view(int_dtype), pattern


def fill(tensor: torch.Tensor) -> torch.Tensor:
    bits, pattern = _bits(tensor)
    bits.fill_(pattern)
    return tensor


def is_poison(tensor: torch.Tensor) -> torch.Tensor:
    """Elementwise: True where the tensor still holds the poison pattern, bit for bit."""
    bits, pattern = _bits(tensor)
    return bits == pattern


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, so NaNs compare equal to themselves and -0.0 differs from 0.0."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a)[0], _bits(b)[0])


def bits_differing(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many elements of two same-shaped tensors differ bit for bit."""
    return int((_bits(a)[0] != _bits(b)[0]).sum())


def _storage_span(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements of storage a view with this shape and stride reaches, from its first element."""
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(shape, stride))


class Guarded:
    """A tensor that lives in the middle of a larger, poisoned buffer."""

    def __init__(self, template: torch.Tensor, span: int, offset: int = 0, device: torch.device | None = None):
        self.front = FRONT_BYTES // template.element_size()
        self.span = span
        device = template.device if device is None else device
        self.buffer = fill(torch.empty(self.front + span + BACK_ELEMENTS, dtype=template.dtype, device=device))
        self.tensor = self.buffer.as_strided(template.shape, template.stride(), self.front + offset)

    @property
    def nbytes(self) -> int:
        """The bytes the allocation asked for (the guard cells around it not counted)."""
        return self.span * self.buffer.element_size()

    def overrun(self) -> int:
        """How many guard cells were written: stores outside the tensor's own memory."""
        before = self.buffer[: self.front]
        after = self.buffer[self.front + self.span :]
        return int((~is_poison(before)).sum() + (~is_poison(after)).sum())


def guarded_empty(template: torch.Tensor, device: torch.device | None = None) -> Guarded:
    """A poisoned tensor with the template's shape, strides and dtype, on the template's device
    unless another is named (the template may then live on the "meta" device, holding no memory)."""
    return Guarded(template, _storage_span(tuple(template.shape), tuple(template.stride())), device=device)


def guarded_copy(tensor: torch.Tensor) -> Guarded:
    """The same values in a guarded buffer: the whole storage is copied, gaps between rows included,
    so a kernel that ignores the row stride reads real (wrong) numbers, not poison."""
    offset = tensor.storage_offset()
    span = offset + _storage_span(tuple(tensor.shape), tuple(tensor.stride()))
    guarded = Guarded(tensor, span, offset)
    source = tensor.as_strided((span,), (1,), 0)
    guarded.buffer[guarded.front : guarded.front + span].copy_(source)
    return guarded
