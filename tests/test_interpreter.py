"""The CPU tier runs what students copy from Triton's tutorials (grader/child/interpreter.py).

Each case runs in a fresh process with TRITON_INTERPRET=1 (Triton reads the flag at import),
forked from one that has only imported numpy, torch and Triton (forkserver.py), with
`interpreter.install()` called before the kernels in tests/kernels/ are imported, as the child does.
"""

from __future__ import annotations

import json
import textwrap
from typing import Iterator

import numpy
import pytest
import torch

from forkserver import ForkServer, interpreted

# Measured on the GPU image (numpy 2.5.2): Triton 3.6's interpreter itself fails there ("only
# 0-dimensional arrays can be converted to Python scalars"); the CPU tier pins numpy 1.26.
pytestmark = pytest.mark.skipif(int(numpy.__version__.split(".")[0]) >= 2,
                                reason=f"Triton 3.6's interpreter needs numpy < 2, this Python has {numpy.__version__}")

PRELUDE = """
import importlib.util, json, math, sys
import torch, triton
from grader.child import interpreter
if INSTALL:
    interpreter.install()

def load(name):
    spec = importlib.util.spec_from_file_location(name, f"tests/kernels/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def error_of(call):
    try:
        call()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return ""

torch.manual_seed(0)
"""


@pytest.fixture(scope="module")
def forks(tmp_path_factory) -> Iterator[ForkServer]:
    """Where each case's fresh process comes from; the module's cases share a Triton cache."""
    with interpreted(tmp_path_factory) as server:
        yield server


def run_child(body: str, forks: ForkServer, install: bool = True) -> dict:
    """Run `body` after PRELUDE in a fresh process; it prints one JSON line, which is returned."""
    done = forks.run(PRELUDE.replace("INSTALL", str(install)) + textwrap.dedent(body))
    assert done.returncode == 0, f"the child failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU's own driver is active here")
def test_without_install_the_tutorials_fail_at_import(forks):
    """What install() is for: Triton 3.6's interpreter has no active driver."""
    result = run_child("""
        print(json.dumps({"error": error_of(lambda: load("tutorial_vector_add"))}))
    """, forks, install=False)  # fmt: skip
    assert "0 active drivers ([]). There should only be one." in result["error"]


def test_driver_answers_as_the_grading_gpu(forks):
    result = run_child("""
        from triton.runtime import driver
        target = driver.active.get_current_target()
        print(json.dumps({
            "device": str(driver.active.get_active_torch_device()),
            "target": [target.backend, target.arch, target.warp_size],
            "properties": driver.active.utils.get_device_properties(None),
            "current_device": driver.active.get_current_device(),
            "dram_gbps": triton.testing.get_dram_gbps(),
        }))
    """, forks)  # fmt: skip
    assert result["device"] == "cpu"  # the grader's tensors live on the CPU
    assert result["target"] == ["cuda", 90, 32]
    # As an H200's driver reports them (measured with Triton 3.6).
    assert result["properties"] == {
        "max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132, "warpSize": 32,
        "sm_clock_rate": 1980000, "mem_clock_rate": 3201000, "mem_bus_width": 6016,
    }  # fmt: skip
    assert result["current_device"] == 0
    assert result["dram_gbps"] == pytest.approx(4814, rel=0.01)


def test_tutorial_vector_add_with_a_module_level_device(forks):
    result = run_child("""
        tutorial = load("tutorial_vector_add")
        x, y = torch.rand(98432), torch.rand(98432)
        print(json.dumps({"device": str(tutorial.DEVICE), "right": torch.equal(tutorial.add(x, y), x + y)}))
    """, forks)  # fmt: skip
    assert result == {"device": "cpu", "right": True}


def test_tutorial_softmax_sizes_its_grid_from_the_gpu(forks):
    """Device properties at import, then warmup(), _init_handles(), n_regs, metadata.shared and a
    launch of the warmed-up kernel: the figures are the H100's for this kernel (12320 bytes,
    32 registers, measured there)."""
    result = run_child("""
        tutorial = load("tutorial_softmax")
        x = torch.randn(181, 781)
        y = tutorial.softmax(x)
        kernel = tutorial.softmax_kernel.warmup(y, x, 781, 781, 181, 781, BLOCK_SIZE=1024, num_stages=4,
                                                num_warps=8, grid=(1, ))
        right = torch.allclose(y, torch.softmax(x, dim=1), atol=1e-6)
        print(json.dumps({"right": right, "shared": kernel.metadata.shared, "n_regs": kernel.n_regs,
                          "n_spills": kernel.n_spills, "ptx": ".target sm_90" in kernel.asm["ptx"]}))
    """, forks)  # fmt: skip
    assert result == {"right": True, "shared": 12320, "n_regs": 32, "n_spills": 0, "ptx": True}


def test_a_warmed_up_kernel_that_does_not_fit_raises_out_of_resources(forks):
    result = run_child("""
        tutorial = load("tutorial_softmax")
        x = torch.randn(2, 100000)
        kernel = tutorial.softmax_kernel.warmup(x, x, 100000, 100000, 2, 100000, BLOCK_SIZE=131072, num_stages=2,
                                                num_warps=8, grid=(1, ))
        print(json.dumps({"error": error_of(kernel._init_handles)}))
    """, forks)  # fmt: skip
    expected = "OutOfResources: out of resource: shared memory, Required: 524320, Hardware limit: 232448"
    assert result["error"].startswith(expected)  # what the H100 said for this kernel


def test_an_autotuned_config_with_a_bug_is_named(forks):
    """K // BLOCK_K instead of tl.cdiv: with K = 96 only the BLOCK_K=64 config drops columns."""
    result = run_child("""
        matmul = load("autotuned_matmul")
        a, b = torch.randn(50, 96), torch.randn(96, 70)
        print(json.dumps({"error": error_of(lambda: matmul.matmul_floor_k(a, b))}))
    """, forks)  # fmt: skip
    error = result["error"]
    assert error.startswith("ConfigsDisagree: ")
    assert "config 2 (BLOCK_M=32, BLOCK_N=32, BLOCK_K=64, num_warps=8, num_stages=3)" in error
    assert "config 0 (BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=3)" in error
    assert "`c_ptr`" in error and "elements differ" in error


def test_every_config_runs_for_each_new_key(forks):
    """Three configs and the final launch for a new (M, N, K); one launch for a key seen before;
    and a bug that the first key cannot show (K = 128 suits every BLOCK_K) is caught at the next."""
    result = run_child("""
        from triton.runtime.interpreter import InterpretedFunction
        launches = []
        run = InterpretedFunction.run
        def counted(self, *args, **kwargs):
            launches.append(kwargs.get("BLOCK_K"))
            return run(self, *args, **kwargs)
        InterpretedFunction.run = counted
        matmul = load("autotuned_matmul")
        a, b = torch.randn(50, 96), torch.randn(96, 70)
        right = torch.allclose(matmul.matmul(a, b), a @ b, atol=1e-4)
        first, launches[:] = list(launches), []
        matmul.matmul(a, b)
        again, launches[:] = list(launches), []
        matmul.matmul(a[:, :64], b[:64])
        new_key = list(launches)
        a2, b2 = torch.randn(50, 128), torch.randn(128, 70)
        floor_ok = torch.allclose(matmul.matmul_floor_k(a2, b2), a2 @ b2, atol=1e-4)
        print(json.dumps({"right": right, "first": first, "again": again, "new_key": new_key, "floor_ok": floor_ok,
                          "later": error_of(lambda: matmul.matmul_floor_k(a, b))}))
    """, forks)  # fmt: skip
    assert result["right"] and result["floor_ok"]
    assert result["first"] == [32, 32, 64, 32]  # each config, then the chosen one (the first: nothing is timed)
    assert result["again"] == [32]
    assert result["new_key"] == [32, 32, 64, 32]
    assert "config 2" in result["later"]


def test_reset_to_zero_restore_value_and_heuristics(forks):
    result = run_child("""
        hooks = load("autotuned_hooks")
        x = torch.randn(1000)
        total = hooks.total(x).item()
        before = x.clone()
        hooks.increment_(x)
        print(json.dumps({
            "total": total, "expected": x.sum().item() - 1000,
            "incremented_once": torch.equal(x, before + 1),
            "scaled": torch.equal(hooks.scale(x), x * 2) and torch.equal(hooks.scale(x[:896]), x[:896] * 2),
        }))
    """, forks)  # fmt: skip
    assert result["total"] == pytest.approx(result["expected"], rel=1e-4)  # added once, not once per config
    assert result["incremented_once"] and result["scaled"]


def test_a_config_that_leaves_the_output_unwritten_is_named(forks):
    """Each config starts from the arguments as passed (NaN-poisoned here), so the BLOCK=64
    config's unwritten half shows as NaN instead of hiding behind the BLOCK=32 config's values."""
    result = run_child("""
        hooks = load("autotuned_hooks")
        print(json.dumps({"error": error_of(lambda: hooks.scale_fixed_grid(torch.randn(1000)))}))
    """, forks)  # fmt: skip
    assert "config 1 (BLOCK=64, num_warps=2, num_stages=3)" in result["error"]
    assert "config 0 (BLOCK=32, num_warps=1, num_stages=3)" in result["error"]
    assert "NaN in 744 elements for one and 488 for the other" in result["error"]


def test_triton_testing_helpers_run(forks):
    result = run_child("""
        x = torch.randn(100)
        one = triton.testing.do_bench(lambda: x * 2)
        three = triton.testing.do_bench(lambda: x * 2, quantiles=[0.5, 0.2, 0.8])
        graph = triton.testing.do_bench_cudagraph(lambda: x * 2)
        triton.testing.assert_close(x, x.clone())
        mismatch = error_of(lambda: triton.testing.assert_close(x, x + 1))

        @triton.testing.perf_report(triton.testing.Benchmark(
            x_names=["N"], x_vals=[128], line_arg="provider", line_vals=["triton"], line_names=["Triton"],
            ylabel="GB/s", plot_name="add", args={}))
        def benchmark(N, provider):
            return 1.0

        print(json.dumps({"one": one, "three": three, "graph": graph, "mismatch": mismatch,
                          "decorated": type(benchmark).__name__}))
    """, forks)  # fmt: skip
    assert result["one"] > 0 and result["graph"] > 0  # a dummy (the interpreter's wall time), never 0
    assert len(result["three"]) == 3
    assert result["mismatch"].startswith("AssertionError")
    assert result["decorated"] == "Mark"


def test_block_pointers_and_tensor_descriptors(forks):
    """Triton 3.6's interpreter runs make_block_ptr (boundary_check, zero and NaN padding, advance)
    and in-kernel tensor descriptors; like the GPU it refuses descriptor strides that are not
    multiples of 16 bytes."""
    result = run_child("""
        blocks = load("block_pointers")
        a, b = torch.randn(50, 70), torch.randn(45, 70)
        tile = blocks.padded_tile(torch.randn(5, 7), 8)
        a2, b2 = torch.randn(50, 72), torch.randn(48, 72)
        print(json.dumps({
            "block_ptr": torch.allclose(blocks.matmul_bt(a, b), a @ b.T, atol=1e-4),
            "nan_padding": bool(tile[:5, :7].isfinite().all() and tile[5:].isnan().all() and tile[:, 7:].isnan().all()),
            "descriptor": torch.allclose(blocks.descriptor_bt(a2, b2), a2 @ b2.T, atol=1e-4),
            "unaligned": error_of(lambda: blocks.descriptor_bt(a, b)),
        }))
    """, forks)  # fmt: skip
    assert result["block_ptr"] and result["nan_padding"] and result["descriptor"]
    assert "stride must be 16-byte aligned" in result["unaligned"]


def test_the_comparison_is_not_the_students_torch_work(forks):
    """The grader judges a call by the torch ops the profiler saw it run (a torch fallback is
    `forbidden_op`, any pass over memory in a fused part `not_fused`); the copies and comparisons
    behind the configs' agreement must not show among them. Judged here by the child's own witness,
    the CallMonitor, as a graded call is."""
    result = run_child("""
        from pathlib import Path
        from grader.judging import ops
        from grader.child.monitor import CallMonitor
        matmul = load("autotuned_matmul")
        a, b = torch.randn(50, 96), torch.randn(96, 70)
        own = str(Path("tests/kernels").resolve())
        with CallMonitor(Path(own), "cpu", lambda filename: not filename.startswith(own)) as monitor:
            matmul.matmul(a, b)
        seen = monitor.activity().ops
        print(json.dumps({"ops": {op.name: op.count for op in seen},
                          "touching": sorted(op.name for op in seen if ops.touches_data(op.name))}))
    """, forks)  # fmt: skip
    # The launcher's own torch.full (a pass over memory), and views at most: no copy, no compute.
    assert result["touching"] == ["aten::full"], result["ops"]


def test_a_jit_function_called_from_host_code_fails_as_on_the_gpu(forks):
    """On the GPU `tl.cdiv(n, 64)` in a launcher raises (a JITFunction may only be called from a
    kernel); the interpreter's own function would answer. Inside a kernel it still runs."""
    result = run_child("""
        import triton.language as tl
        matmul = load("autotuned_matmul")
        a, b = torch.randn(50, 96), torch.randn(96, 70)
        on_host = error_of(lambda: tl.cdiv(1000, 64))
        in_kernel = error_of(lambda: matmul.matmul(a, b))  # its kernel calls a @jit helper, and tl.cdiv
        print(json.dumps({"on_host": on_host, "in_kernel": in_kernel, "again": error_of(lambda: tl.cdiv(7, 2))}))
    """, forks)  # fmt: skip
    assert result["on_host"] == "RuntimeError: Cannot call @triton.jit'd outside of the scope of a kernel"
    assert result["in_kernel"] == ""
    assert result["again"] == result["on_host"], "leaving a kernel (here the launch) ends the permission"


def test_each_task_compares_the_configs_whatever_an_earlier_one_tuned(forks):
    """Triton keeps an autotuner's pick per key for the process. A key that leaves out the columns
    lets a case whose configs agree (128 columns) hide the disagreement of a later one (100): the
    CPU tier forgets the picks as each task begins (interpreter.forget_tunings), so the later case
    is checked as it would be alone."""
    result = run_child("""
        summing = load("autotuned_row_sum")
        agree, disagree = torch.rand(4, 128), torch.rand(4, 100)
        first = error_of(lambda: summing.row_sum(agree))
        hidden = error_of(lambda: summing.row_sum(disagree))  # the same key: the pick, unchecked
        interpreter.forget_tunings()
        found = error_of(lambda: summing.row_sum(disagree))
        print(json.dumps({"first": first, "hidden": hidden, "found": found}))
    """, forks)  # fmt: skip
    assert result["first"] == "" and result["hidden"] == ""
    assert result["found"].startswith("ConfigsDisagree: "), result["found"]
