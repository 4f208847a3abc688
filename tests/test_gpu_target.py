"""The CPU tier compiles every launched kernel for the GPU target (grader/child/gpu_target.py).

Each case runs in a fresh process with TRITON_INTERPRET=1 (forked from one that has only imported
numpy, torch and Triton: forkserver.py), launch hook and all, as the child does:
kernels run in the interpreter, and each launch is also recorded; compile_all() then reports what
Triton's compiler says for sm_90. The figures asserted here are those an H100 gave for the same
kernels with Triton 3.6 (shared memory, registers, the out-of-resource message).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Iterator

import numpy
import pytest

from forkserver import ForkServer, interpreted

REPO = Path(__file__).resolve().parent.parent
# Measured on the GPU image (numpy 2.5.2): Triton 3.6's interpreter itself fails there ("only
# 0-dimensional arrays can be converted to Python scalars"); the CPU tier pins numpy 1.26.
pytestmark = pytest.mark.skipif(int(numpy.__version__.split(".")[0]) >= 2,
                                reason=f"Triton 3.6's interpreter needs numpy < 2, this Python has {numpy.__version__}")
KERNELS = REPO / "tests" / "kernels"

PRELUDE = """
import dataclasses, importlib.util, json, sys, time
import torch, triton
from grader.child import gpu_target, interpreter
interpreter.install()

from triton.runtime.interpreter import InterpretedFunction
_run = InterpretedFunction.run

def record_then_run(self, *args, grid, warmup, **kwargs):  # what the grader's launch hook does
    if not warmup:
        gpu_target.record_launch(self, args, kwargs, grid)
    return _run(self, *args, grid=grid, warmup=warmup, **kwargs)

InterpretedFunction.run = record_then_run

def load(name):
    spec = importlib.util.spec_from_file_location(name, f"tests/kernels/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def reports():
    return [dict(dataclasses.asdict(r), launches=r.launches) for r in gpu_target.compile_all()]

torch.manual_seed(0)
"""


@pytest.fixture(scope="module")
def forks(tmp_path_factory) -> Iterator[ForkServer]:
    """Where each case's fresh process comes from; the module's cases share a Triton cache."""
    with interpreted(tmp_path_factory) as server:
        yield server


def run_child(body: str, forks: ForkServer) -> dict:
    """Run `body` after PRELUDE in a fresh process; it prints one JSON line, which is returned."""
    done = forks.run(PRELUDE + textwrap.dedent(body))
    assert done.returncode == 0, f"the child failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def line_of(file: str, text: str) -> int:
    lines = (KERNELS / file).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_vector_add_compiles_with_no_shared_memory(forks):
    result = run_child("""
        tutorial = load("tutorial_vector_add")
        x = torch.rand(98432)
        tutorial.add(x, x)
        tutorial.add(x, x)  # the same specialization: one report
        print(json.dumps(reports()))
    """, forks)  # fmt: skip
    [report] = result
    assert report["kernel"] == "add_kernel" and report["file"] == str(KERNELS / "tutorial_vector_add.py")
    assert report["line"] == line_of("tutorial_vector_add.py", "def add_kernel")
    assert report["constexprs"] == {"BLOCK_SIZE": "1024"}
    assert report["compiled"] and report["launches"] and report["error"] == ""
    assert report["shared_bytes"] == 0 and report["shared_limit"] == 232448
    assert (report["registers"], report["spills"], report["num_warps"]) == (26, 0, 4)
    assert report["tf32_dots"] == 0 and not report["autotuned"]


def test_whole_row_softmax_needs_more_shared_memory_than_the_gpu_has(forks):
    """The tutorial's kernel with a whole 100000-wide row in one block, as the GPU refused it:
    "out of resource: shared memory, Required: 524320, Hardware limit: 232448"."""
    result = run_child("""
        tutorial = load("tutorial_softmax")
        x = torch.randn(2, 100000)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(100000)
        tutorial.softmax_kernel[(2, )](y, x, x.stride(0), y.stride(0), 2, 100000, block, 2, num_warps=8)
        right = torch.allclose(y, torch.softmax(x, dim=1), atol=1e-6)
        print(json.dumps({"right": right, "reports": reports()}))
    """, forks)  # fmt: skip
    assert result["right"]  # the interpreter has no shared memory to run out of
    [report] = result["reports"]
    assert report["constexprs"] == {"BLOCK_SIZE": "131072", "num_stages": "2"}
    assert report["compiled"] and report["num_warps"] == 8
    assert (report["shared_bytes"], report["shared_limit"]) == (524320, 232448)
    assert not report["launches"]


def test_float32_dot_runs_in_tf32_unless_told_ieee(forks):
    result = run_child("""
        kernels = load("compiler_only")
        a, b = torch.randn(32, 32), torch.randn(32, 32)
        exact = [torch.allclose(kernels.dot(a, b, ieee), a @ b, atol=1e-4) for ieee in (False, True)]
        print(json.dumps({"exact": exact, "reports": reports()}))
    """, forks)  # fmt: skip
    assert result["exact"] == [True, True]  # the interpreter multiplies in float32 either way
    default, ieee = result["reports"]
    assert default["constexprs"] == {"N": "32", "IEEE": "False"} and default["tf32_dots"] == 1
    assert ieee["constexprs"] == {"N": "32", "IEEE": "True"} and ieee["tf32_dots"] == 0
    assert default["compiled"] and ieee["compiled"]


def test_what_the_interpreter_runs_but_the_compiler_rejects(forks):
    """A plain-int global and a `break`: Python runs both; Triton's compiler refuses both, and says
    where. The GPU's warmup() raises the same error."""
    result = run_child("""
        kernels = load("compiler_only")
        x = torch.arange(1.0, 301.0)
        kernels.double_(x)
        doubled = torch.equal(x, torch.arange(1.0, 301.0) * 2)
        x[7] = -1
        counted = kernels.count_leading_positive(x).item()
        try:
            kernels.double_kernel.warmup(x, 300, grid=(1, ))
            warmup = ""
        except Exception as error:
            warmup = type(error).__name__
        print(json.dumps({"doubled": doubled, "counted": counted, "warmup": warmup, "reports": reports()}))
    """, forks)  # fmt: skip
    assert result["doubled"] and result["counted"] == 7
    assert result["warmup"] == "CompilationError"
    by_name = {r["kernel"]: r for r in result["reports"]}
    global_int, brk = by_name["double_kernel"], by_name["count_leading_positive_kernel"]
    assert not global_int["compiled"] and not global_int["launches"]
    assert "Cannot access global variable BLOCK" in global_int["error"]
    assert global_int["error_line"] == line_of("compiler_only.py", "offsets = tl.program_id(0) * BLOCK")
    assert not brk["compiled"] and "unsupported AST node type: Break" in brk["error"]
    assert brk["error_line"] == line_of("compiler_only.py", "            break")


def test_specialization_follows_triton(forks):
    """As on a GPU: an integer argument equal to 1 becomes a constexpr, and a pointer that is not
    16-byte aligned compiles separately; an unknown keyword, which the interpreter drops, fails."""
    result = run_child("""
        tutorial = load("tutorial_vector_add")
        x = torch.rand(1000)
        grid = (1, )
        tutorial.add_kernel[grid](x, x, x, 1000, BLOCK_SIZE=1024)
        tutorial.add_kernel[grid](x[1:], x, x, 999, BLOCK_SIZE=1024)
        tutorial.add_kernel[grid](x, x, x, 1, BLOCK_SIZE=1024)
        tutorial.add_kernel[grid](x, x, x, 1000, BLOCK_SIZE=1024, num_warp=8)
        first = reports()
        tutorial.add_kernel[grid](x, x, x, 1000, BLOCK_SIZE=1024)  # a second call, the same kernel
        started = time.perf_counter()
        again = reports()
        print(json.dumps({"reports": first, "again": again, "again_s": time.perf_counter() - started}))
    """, forks)  # fmt: skip
    aligned, unaligned, one, misspelt = result["reports"]
    assert aligned["compiled"] and unaligned["compiled"]
    assert one["constexprs"] == {"n_elements": "1", "BLOCK_SIZE": "1024"}
    assert not misspelt["compiled"]
    assert misspelt["error"] == "KeyError: 'Keyword argument num_warp was specified but unrecognised'"
    assert result["again"] == [aligned]  # only what was launched since, from the cache
    assert result["again_s"] < 0.5


def test_autotuned_launches_are_marked(forks):
    """A config that does not fit is skipped by the GPU's autotuner, so its reports say autotuned."""
    result = run_child("""
        matmul = load("autotuned_matmul")
        a, b = torch.randn(50, 96), torch.randn(96, 70)
        matmul.matmul(a, b)
        print(json.dumps(reports()))
    """, forks)  # fmt: skip
    assert [r["constexprs"]["BLOCK_K"] for r in result] == ["32", "32", "64"]
    assert all(r["autotuned"] and r["compiled"] and r["launches"] for r in result)
    assert [r["tf32_dots"] for r in result] == [1, 1, 1]
    assert [(r["num_warps"], r["num_stages"]) for r in result] == [(4, 3), (4, 2), (8, 3)]


def test_reports_answer_for_their_own_launches_only(forks):
    """What one task launched never shows in another's reports (issue 45): launches forgotten as a
    task begins are not reported, and whether a kernel was only autotuned is said of the launches
    since the last look, not of every launch the process has made."""
    result = run_child("""
        matmul = load("autotuned_matmul")
        a, b = torch.randn(50, 96), torch.randn(96, 70)
        c = torch.empty(50, 70)
        config = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=3)
        grid = (2, 3)
        matmul.matmul_kernel.fn[grid](a, b, c, 50, 70, 96, **config)  # config 0, launched by hand
        by_hand = reports()
        matmul.matmul_kernel.fn[grid](a, b, c, 50, 70, 96, **config)  # a task whose call raised after it
        gpu_target.forget_launches()
        matmul.matmul(a, b)  # the next task: every config, by the autotuner alone
        print(json.dumps({"by_hand": by_hand, "tuned": reports()}))
    """, forks)  # fmt: skip
    [by_hand] = result["by_hand"]
    assert not by_hand["autotuned"]
    assert [r["constexprs"]["BLOCK_K"] for r in result["tuned"]] == ["32", "32", "64"]
    assert all(r["autotuned"] for r in result["tuned"]), "config 0 was launched by hand only in an earlier task"


def test_in_kernel_descriptors_need_an_allocator(forks):
    """Only the GPU needs triton.set_allocator (for the descriptors' scratch memory)."""
    result = run_child("""
        blocks = load("block_pointers")
        a, b = torch.randn(50, 72), torch.randn(48, 72)
        right = torch.allclose(blocks.descriptor_bt(a, b, set_allocator=False), a @ b.T, atol=1e-4)
        print(json.dumps({"right": right, "reports": reports()}))
    """, forks)  # fmt: skip
    [report] = result["reports"]
    assert result["right"] and report["compiled"]
    assert report["missing_allocator"] and not report["launches"]


def test_loads_are_counted_in_the_code_generators_ttir(forks):
    """Block pointers, in-kernel tensor descriptors and pointer arithmetic, counted in the TTIR that
    Triton's code generator wrote (asm["source"]): the final TTIR has block pointers lowered to
    tensors of pointers already. A load through pointers is named by its line. The GPU tier reads
    the same field of the kernel a launch returns, through the launch log (hooks.py): here, a
    kernel compiled for the GPU target stands in for the launched one."""
    result = run_child("""
        from pathlib import Path
        from grader.child.hooks import LaunchLog

        blocks, kernels = load("block_pointers"), load("compiler_only")
        a, b = torch.randn(50, 72), torch.randn(48, 72)
        blocks.matmul_bt(a, b)
        blocks.descriptor_bt(a, b)
        kernels.dot(torch.randn(32, 32), torch.randn(32, 32), True)
        found = reports()
        launch = ((a, b, torch.empty(50, 48), 50, 48, 72), {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})
        _, compiled = gpu_target.compile_now(blocks.matmul_bt_kernel, *launch)
        with LaunchLog(Path("tests")) as log:
            log.record(blocks.matmul_bt_kernel, compiled.kernel)
        print(json.dumps({"reports": found, "logged": [dataclasses.asdict(k) for k in log.loads()]}))
    """, forks)  # fmt: skip
    loads = {r["kernel"]: r["loads"] for r in result["reports"]}
    assert result["logged"] == [loads["matmul_bt_kernel"]]
    counted = {name: (k["block_pointers"], k["descriptors"], k["pointer_tensors"]) for name, k in loads.items()}
    assert counted == {"matmul_bt_kernel": (2, 0, 0), "descriptor_bt_kernel": (0, 2, 0), "dot_kernel": (0, 0, 2)}
    assert all(found["read"] for found in loads.values())
    assert loads["dot_kernel"]["file"] == "compiler_only.py"
    line = line_of("compiler_only.py", "a, b = tl.load(a_ptr + tile)")
    assert loads["dot_kernel"]["first_pointer_tensor"] == f"compiler_only.py, line {line}"
    assert loads["matmul_bt_kernel"]["first_pointer_tensor"] == ""


def test_loads_are_read_from_the_text_with_their_lines():
    """Which tt.load is which, by the type after its last " : " (a block pointer's attributes hold
    colons too), and a pointer load's line through named and inlined locations."""
    from grader.child import loads

    ttir = """
    %a = tt.load %p {boundaryCheck = array<i32: 0, 1>, padding = 1 : i32} : !tt.ptr<tensor<64x32xf16>> loc(#loc9)
    %b = tt.descriptor_load %d[%i, %j] : !tt.tensordesc<tensor<64x32xf16>> -> tensor<64x32xf16> loc(#loc9)
    %s = tt.load %q : !tt.ptr<f32> loc(#loc9)
    %c = tt.load %r, %m, %o : tensor<64x32x!tt.ptr<f16>> loc(callsite(#loc8 at #loc9))
    %e = tt.load %r : tensor<64x!tt.ptr<f16>> loc("/x/kernel.py":40:8)
#loc7 = loc("/x/kernel.py":31:12)
#loc8 = loc("c"(#loc7))
#loc9 = loc("/x/kernel.py":20:4)
"""
    found = loads.count("k", "/x/kernel.py", ttir)
    assert (found.block_pointers, found.descriptors, found.pointer_tensors) == (1, 1, 2)
    assert found.first_pointer_tensor == "kernel.py, line 31" and found.file == "kernel.py" and found.read
    assert not loads.count("k", "/x/kernel.py", None).read
