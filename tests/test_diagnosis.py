"""Each diagnosis on the signature it names, and none on right outputs (grader/judging/diagnosis.py). The
known-wrong submissions that earn them through the whole pipeline name theirs in expect.toml."""

from __future__ import annotations

import pytest
import torch

from grader.judging import diagnosis
from grader.assignment.spec import Tolerance

FLOAT32 = Tolerance(rtol=1e-5, atol=1e-5, norm=1e-5)


def matmul(inputs: dict) -> torch.Tensor:
    return inputs["a"].to(torch.float64) @ inputs["b"].to(torch.float64)


@pytest.fixture
def product():
    generator = torch.Generator().manual_seed(0)
    inputs = {"a": torch.randn(96, 320, generator=generator), "b": torch.randn(320, 96, generator=generator)}
    return inputs, matmul(inputs)


def test_tf32_products_are_named_and_float32_products_are_not(product):
    inputs, ref = product
    for nearest in (True, False):
        tf32 = matmul({k: diagnosis.round_to_tf32(v, nearest) for k, v in inputs.items()}).float()
        found = diagnosis.diagnose("wrong_result", tf32, ref, FLOAT32, inputs, matmul)
        assert found and found[0] == "tf32" and 'input_precision="ieee"' in found[1]
    assert diagnosis.diagnose("wrong_result", inputs["a"] @ inputs["b"], ref, FLOAT32, inputs, matmul) is None
    # Wrong in another way (a bfloat16 accumulator would be `rounded`): noise is not TF32.
    noisy = (ref * (1 + 1e-3 * torch.randn(ref.shape, dtype=torch.float64))).float()
    assert diagnosis.diagnose("wrong_result", noisy, ref, FLOAT32, inputs, matmul) is None


def test_tf32_rounding_keeps_ten_mantissa_bits():
    x = torch.tensor([1 + 2**-10, 1 + 2**-11 + 2**-12, 1 + 2**-12, -3.0, float("inf")])
    assert diagnosis.round_to_tf32(x).tolist() == [1 + 2**-10, 1 + 2**-10, 1.0, -3.0, float("inf")]
    assert diagnosis.round_to_tf32(x, nearest=False).tolist() == [1 + 2**-10, 1.0, 1.0, -3.0, float("inf")]


@pytest.mark.parametrize("narrow", [torch.bfloat16, torch.float16])
def test_a_float32_output_of_narrow_values_is_rounded(product, narrow):
    inputs, ref = product
    found = diagnosis.diagnose("wrong_result", ref.to(narrow).float(), ref, FLOAT32, inputs, matmul)
    assert found and found[0] == "rounded" and str(narrow).split(".")[1] in found[1]


def test_transposed_outputs_square_and_not(product):
    inputs, ref = product
    square = diagnosis.diagnose("wrong_result", ref.t().float(), ref, FLOAT32, inputs, matmul)
    assert square and square[0] == "transposed" and "reference transposed" in square[1]
    wide = torch.randn(24, 40, dtype=torch.float64)
    in_transposed_order = wide.t().contiguous().reshape(24, 40).float()
    found = diagnosis.diagnose("wrong_result", in_transposed_order, wide, FLOAT32, {"x": wide.float()}, lambda d: wide)
    assert found and found[0] == "transposed" and "transposed order" in found[1]
    shifted = torch.roll(ref, 1, dims=1).float()
    assert diagnosis.diagnose("wrong_result", shifted, ref, FLOAT32, inputs, matmul) is None


def test_nan_from_new_memory_and_nan_from_an_overflow_are_told_apart():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 128, generator=generator)
    x[5] *= 40  # one row whose softmax overflows without max subtraction
    ref = torch.softmax(x.double(), dim=-1)
    overflowed = ref.float().clone()
    overflowed[5] = float("nan")  # exp overflowed to inf, and inf / inf is NaN
    found = diagnosis.diagnose("nan_or_inf", overflowed, ref, FLOAT32, {"x": x}, None)
    assert found and found[0] == "overflow"
    read_first = ref.float().clone()
    read_first[:, ::3] = float("nan")  # NaN where no input is large: memory read before it was written
    found = diagnosis.diagnose("nan_or_inf", read_first, ref, FLOAT32, {"x": x}, None)
    assert found and found[0] == "poison_read" and "beta * C" in found[1]
    inf_somewhere = read_first.clone()
    inf_somewhere[0, 0] = float("inf")
    assert diagnosis.diagnose("nan_or_inf", inf_somewhere, ref, FLOAT32, {"x": x}, None) is None


def test_a_right_output_or_a_wrong_shape_gets_none(product):
    inputs, ref = product
    for out in (ref.float(), torch.zeros(3)):
        assert diagnosis.diagnose("wrong_result", out, ref, FLOAT32, inputs, matmul) is None
    assert diagnosis.diagnose("ok", ref.t().float(), ref, FLOAT32, inputs, matmul) is None


def test_nan_in_large_rows_by_position_is_neither_overflow_nor_poison():
    """A causal mask that leaves a head's first query no key makes that row 0 / 0, whatever its
    inputs; that row is planted large, but larger rows stay right: no exp overflowed there."""
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(2, 40, 16, generator=generator)
    q[:, 0] *= 24
    q[:, 9] *= 48  # louder than the first rows, and right
    ref = torch.softmax(q.double() @ q.double().transpose(-1, -2), dim=-1) @ q.double()
    first_rows = ref.float().clone()
    first_rows[:, 0] = float("nan")
    assert diagnosis.diagnose("nan_or_inf", first_rows, ref, FLOAT32, {"q": q}, None) is None
    loudest = ref.float().clone()
    loudest[:, 9] = float("nan")
    loudest[:, 0] = float("nan")
    found = diagnosis.diagnose("nan_or_inf", loudest, ref, FLOAT32, {"q": q}, None)
    assert found and found[0] == "overflow"


def test_rows_each_off_by_their_own_factor_are_a_reduction_and_one_factor_is_not():
    """A softmax that loads its masked-off lanes as 0 counts exp(0 - max) once per lane in each
    row's sum: every row is right up to its own factor. A whole output times 2 is something else."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(48, 100, generator=generator, dtype=torch.float64)
    ref = torch.softmax(x, dim=-1)
    shifted = torch.exp(x - x.amax(dim=-1, keepdim=True))
    masked_as_zero = shifted / (shifted.sum(dim=-1, keepdim=True) + 28 * torch.exp(-x.amax(dim=-1, keepdim=True)))
    softmax = lambda inputs: torch.softmax(inputs["x"].double(), dim=-1)  # noqa: E731
    found = diagnosis.diagnose("wrong_result", masked_as_zero.float(), ref, FLOAT32, {"x": x.float()}, softmax)
    assert found and found[0] == "reduction" and "-inf for a max" in found[1]
    assert diagnosis.diagnose("wrong_result", (2 * ref).float(), ref, FLOAT32, {"x": x.float()}, softmax) is None


def test_a_wrong_last_block_is_named_and_a_wrong_first_block_is_not():
    ref = torch.randn(37, 1000, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    tail = ref.float().clone()
    tail[:, 992:] = 0.0  # 992 = 31 x 32: the last block of 32 columns
    found = diagnosis.diagnose("wrong_result", tail, ref, FLOAT32, {"x": ref.float()}, lambda d: ref)
    assert found and found[0] == "last_block" and "offs < n" in found[1]
    head = ref.float().clone()
    head[:, :8] = 0.0
    assert diagnosis.diagnose("wrong_result", head, ref, FLOAT32, {"x": ref.float()}, lambda d: ref) is None
