"""The verdict on one output: each wrong output earns the reason that names its first problem."""

from __future__ import annotations

import pytest
import torch

from grader.judging import locate, poison
from grader.judging.numerics import judge
from grader.assignment.spec import Tolerance

pytestmark = pytest.mark.student

TOL = Tolerance(rtol=1e-5, atol=1e-9, norm=1e-6)


def _reference(shape=(37, 100)):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=generator, dtype=torch.float64) + 2.0


def test_exact_output_passes():
    ref = _reference()
    assert judge(ref.float(), ref, torch.float32, TOL).reason == "ok"


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda ref: None, "wrong_result"),
        (lambda ref: ref.float().flatten(), "wrong_shape"),
        (lambda ref: ref.float().t(), "wrong_shape"),
        (lambda ref: ref.half(), "wrong_dtype"),
        (lambda ref: ref.float() * (1 + 1e-3), "wrong_result"),
        (lambda ref: ref.float().masked_fill(ref > 3, float("nan")), "nan_or_inf"),
        (lambda ref: ref.float().masked_fill(ref > 3, float("inf")), "nan_or_inf"),
    ],
)
def test_each_problem_earns_its_reason(make, reason):
    ref = _reference()
    assert judge(make(ref), ref, torch.float32, TOL).reason == reason


def test_poison_survives_copies_and_marks_unwritten_elements():
    ref = _reference()
    out = poison.guarded_empty(ref.float()).tensor
    out[:30] = ref[:30].float()  # the last 7 rows never written
    copied = out.to("cpu", copy=True).contiguous()
    verdict = judge(copied, ref, torch.float32, TOL)
    assert verdict.reason == "unwritten_output"
    assert verdict.metrics["unwritten"] == 7 * 100
    assert verdict.metrics["where"]["bad_row_ranges"] == "30-36"


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.bool, torch.int16, torch.int32, torch.int64])
def test_integer_and_bool_allocations_are_poisoned_too(dtype):
    """A student's `torch.empty(n, dtype=torch.uint8)` comes back poisoned like a float one: the
    pattern is 0xA5 in every byte, which fits any width (a four-byte pattern did not fit a byte,
    and filling a uint8 tensor the student then filled itself raised in the grader)."""
    guarded = poison.guarded_empty(torch.empty(5, dtype=dtype))
    assert poison.is_poison(guarded.tensor).all() and guarded.overrun() == 0
    guarded.tensor.fill_(1)
    assert not poison.is_poison(guarded.tensor).any()


def test_computed_nan_is_not_mistaken_for_poison():
    ref = _reference()
    out = ref.float()
    out[3, 4] = torch.tensor(0.0) / torch.tensor(0.0)
    assert judge(out, ref, torch.float32, TOL).reason == "nan_or_inf"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_poison_pattern_is_a_nan_no_arithmetic_makes(dtype):
    tensor = poison.fill(torch.empty(8, dtype=dtype))
    assert torch.isnan(tensor).all()
    assert poison.is_poison(tensor).all()
    assert not poison.is_poison(tensor * 1).any(), "arithmetic must quiet the signalling NaN"


def test_store_past_the_end_lands_in_the_guard():
    template = torch.empty(100)
    guarded = poison.guarded_empty(template)
    guarded.tensor.fill_(1.0)
    assert guarded.overrun() == 0
    guarded.buffer[guarded.front + 100 : guarded.front + 103] = 0.0  # three elements past the end
    assert guarded.overrun() == 3
    ref = torch.ones(100, dtype=torch.float64)
    assert judge(guarded.tensor, ref, torch.float32, TOL, overrun=3).reason == "wrong_result"


def test_guarded_copy_keeps_strides_and_the_gap_between_rows():
    wide = torch.arange(5 * 8, dtype=torch.float32).reshape(5, 8)
    view = wide[:, :6]
    copy = poison.guarded_copy(view)
    assert copy.tensor.stride() == view.stride()
    assert torch.equal(copy.tensor, view)
    gap = copy.buffer[copy.front : copy.front + 32].reshape(4, 8)[:, 6:]  # the gaps between the 5 rows
    assert torch.equal(gap, wide[:4, 6:]), "a kernel ignoring the stride must read real numbers, not poison"


def test_modified_input_is_reported_before_values():
    ref = _reference()
    verdict = judge(ref.float(), ref, torch.float32, TOL, modified_inputs=["x"])
    assert verdict.reason == "input_modified"


def test_failure_says_where_a_tail_block_is_wrong():
    ref = _reference((37, 1000))
    out = ref.float().clone()
    out[:, 992:] += 1.0  # a bad last column block
    verdict = judge(out, ref, torch.float32, TOL)
    assert verdict.reason == "wrong_result"
    where = verdict.metrics["where"]
    assert where["bad_col_ranges"] == "992-999"
    assert where["bad_rows"] == 37
    assert len(where["worst"]) == 5
    assert "992-999" in verdict.message
    assert verdict.metrics["bad_share"] == pytest.approx(8 / 1000)


def test_map_is_small_and_tiles_are_powers_of_two():
    bad = torch.zeros(1823, 781, dtype=torch.bool)
    bad[1800:, :] = True
    where = locate.bad_map(bad)
    assert len(where["shares"]) <= locate.MAX_CELLS[0] and len(where["shares"][0]) <= locate.MAX_CELLS[1]
    tile_r, tile_c = where["tile"]
    assert tile_r & (tile_r - 1) == 0 and tile_c & (tile_c - 1) == 0
    assert where["shares"][-1][0] == pytest.approx(23 / 31, abs=1e-3) and where["shares"][0][0] == 0.0


def test_ranges_are_compressed():
    mask = torch.zeros(12, dtype=torch.bool)
    mask[[0, 1, 2, 7, 9, 10]] = True
    assert locate.ranges(mask) == "0-2, 7, 9-10"
    assert locate.ranges(torch.ones(5, dtype=torch.bool)) == "0-4"
    assert locate.ranges(torch.arange(40) % 2 == 0, limit=3) == "0, 2, 4 and 17 more ranges"
