"""What the compiler made of each kernel (grader/kernels/compiled_kernels.py), in the report and results.json.

Each reading is earned by a slow or known-wrong submission that names it (`readings` in its
expect.toml, under submissions/ or corpus/), graded here on the CPU tier, which compiles every
launched kernel for the GPU; the solution's grading of the same parts earns none of them. And the
CPU-tier report of solutions/ shows, for every part, each kernel's registers, spills, shared
memory and occupancy on the grading GPU.
"""

from __future__ import annotations

import dataclasses
import tomllib
from types import SimpleNamespace

import pytest

from conftest import SUBMISSIONS, TESTS, grade, known_wrong, requires_gpu
from grader.running import compile_cache
from grader.kernels import compiled_kernels
from grader.reporting import report
from grader.child import hooks, monitor, resources
from grader.grading import Settings, grade_submission
from grader.messages.reports import Activity, KernelResources, TargetReport
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT


def _kernel(**figures) -> KernelResources:
    defaults = {"kernel": "k", "file": "k.py", "registers": 32, "threads": 128, "shared_bytes": 0}
    return KernelResources(**{**defaults, **figures})


def _codes(described: dict) -> list[str]:
    return [r["code"] for r in described["readings"]]


def test_a_kernel_that_fits_has_no_reading():
    described = compiled_kernels.describe(_kernel(registers=32, threads=256, shared_bytes=4096))
    assert described["readings"] == []
    assert described["occupancy"]["blocks_per_sm"] == 8 and described["occupancy"]["warps_per_sm"] == 64


def test_spills_are_read_whatever_the_part_teaches():
    described = compiled_kernels.describe(_kernel(registers=255, spill_bytes=2120))
    assert _codes(described) == ["spills"]
    assert "2120 bytes per thread" in described["readings"][0]["text"]
    assert "too large for the registers" in described["readings"][0]["text"]


def test_occupancy_readings_name_what_limits_it():
    one_warp = compiled_kernels.describe(_kernel(threads=32))
    assert _codes(one_warp) == ["occupancy"] and "32 of its 64 warps" in one_warp["readings"][0]["text"]
    shared = compiled_kernels.describe(_kernel(threads=128, shared_bytes=160 * 1024))
    assert _codes(shared) == ["occupancy"]
    assert "shared memory per block limits you to one block per SM" in shared["readings"][0]["text"]
    registers = compiled_kernels.describe(_kernel(registers=255, threads=256))
    assert "255 registers per thread limits you to one block per SM" in registers["readings"][0]["text"]
    assert compiled_kernels.describe(_kernel(registers=128, threads=256))["readings"] == []  # two blocks: no reading
    too_big = compiled_kernels.describe(_kernel(threads=128, shared_bytes=300 * 1024))
    assert _codes(too_big) == ["no_launch"]


def test_what_the_code_is_made_of_is_read_only_where_the_part_teaches_it():
    scalar = _kernel(global_loads=3, wide_loads=0, sixteen_bit=True, tensor_core_ops=0, shared_accesses=8,
                     conflicted=4, worst_ways=32, worst_stride=128, worst_kind="load", worst_line=109)  # fmt: skip
    assert compiled_kernels.describe(scalar)["readings"] == [] and compiled_kernels.describe(scalar)["made_of"] == []
    taught = compiled_kernels.describe(scalar, ("tensor_cores", "vector_loads", "bank_conflicts"))
    assert _codes(taught) == ["no_tensor_cores", "narrow_loads", "bank_conflicts"]
    assert "at line 109 conflict 32-way on banks (neighbouring lanes 128 bytes apart)" in taught["readings"][2]["text"]
    good = _kernel(global_loads=2, wide_loads=1, sixteen_bit=True, tensor_core_ops=8, shared_accesses=8)
    described = compiled_kernels.describe(good, ("tensor_cores", "vector_loads", "bank_conflicts"))
    assert described["readings"] == []
    assert described["made_of"] == ["tensor cores: 8 mma instruction(s)", "128-bit loads: 1 of 2",
                                    "shared memory: 0 of 8 accesses conflict on banks"]  # fmt: skip
    # float32 in full precision has no tensor-core instruction to use: a fact, not a reading.
    assert compiled_kernels.describe(_kernel(sixteen_bit=False), ("tensor_cores",))["readings"] == []
    # Code that could not be read says nothing of what it is made of.
    assert compiled_kernels.describe(_kernel(read=False, sixteen_bit=True), ("tensor_cores",))["readings"] == []


def test_a_cuda_kernel_whose_launch_was_not_read_gets_the_bounds_that_hold_for_any_block():
    described = compiled_kernels.describe(_kernel(registers=128, threads=0, shared_bytes=48 * 1024))
    assert described["occupancy"] == {"warps_by_registers": 16, "blocks_by_shared": 4, "max_warps_per_sm": 64}


def test_the_cpu_tier_shows_the_launched_config_not_the_autotuner_trials():
    picked, tried = _kernel(kernel="mm", specialization="BLOCK=64"), _kernel(kernel="mm", specialization="BLOCK=128")
    activity = Activity(targets=[TargetReport("mm", "mm.py, line 1", True, autotuned=True, resources=tried),
                                 TargetReport("mm", "mm.py, line 1", True, resources=picked),
                                 TargetReport("mm", "mm.py, line 1", True, resources=picked)])  # fmt: skip
    assert compiled_kernels.launched(activity) == [picked]
    assert compiled_kernels.launched(Activity(resources=[tried])) == [tried]  # the GPU tier's own account


def test_the_gpu_tier_keeps_the_config_an_autotuner_launched_last(tmp_path):
    """hooks.py keeps compiled kernels in the order of their last launch: the autotuner's trials
    first, then the config it picked; monitor.py describes that one."""

    own = tmp_path / "matmul.py"
    own.write_text("def matmul_kernel():\n    pass\n")
    namespace: dict = {}
    exec(compile(own.read_text(), str(own), "exec"), namespace)  # kernels defined in the student's file
    matmul_kernel = namespace["matmul_kernel"]

    def compiled_kernel(block: int):
        return SimpleNamespace(asm={"ptx": ""}, hash=f"h{block}", n_regs=block, n_spills=0,
                               metadata=SimpleNamespace(num_warps=4, num_stages=3, shared=0),
                               src=SimpleNamespace(signature={}, constants={}, fn=None))  # fmt: skip

    wide, narrow = compiled_kernel(128), compiled_kernel(64)
    with hooks.LaunchLog(tmp_path) as log:
        for launched in (wide, narrow, wide, narrow):  # two trials each, then the pick: narrow
            log.record(matmul_kernel, launched)
        log.record(matmul_kernel, narrow)
        log.record(matmul_kernel, wide)  # a later call picked wide after all
        log.record(lambda: None, compiled_kernel(32))  # a kernel of another file: not the student's
    [found] = monitor.launched_resources(log)
    assert found.kernel == "matmul_kernel" and found.registers == 128


def test_a_compiled_kernel_is_read_on_both_tiers_alike():
    text = "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1}, %rd1, %rd2, 1, 1, 1, 0, 1;\n"
    kernel = SimpleNamespace(asm={"ptx": text}, hash="abc", n_regs=168, n_spills=10,
                             metadata=SimpleNamespace(num_warps=8, num_stages=3, shared=98304),
                             src=SimpleNamespace(signature={"a": "*fp16", "b": "tensordesc<bf16[64, 64]>", "M": "i32"},
                                                 constants={(3,): 64}, fn=SimpleNamespace(arg_names=["a", "b", "M", "BLOCK"])))  # fmt: skip
    on_the_gpu = resources.of_compiled(kernel, "mm", "/somewhere/mm.py")  # the driver's figures
    assert (on_the_gpu.registers, on_the_gpu.spill_bytes, on_the_gpu.threads, on_the_gpu.shared_bytes) == (168, 40, 256, 98304)
    assert on_the_gpu.file == "mm.py" and on_the_gpu.tensor_core_ops == 1 and on_the_gpu.sixteen_bit
    assert on_the_gpu.specialization == "bf16, fp16; BLOCK=64"
    on_the_cpu = resources.of_compiled(kernel, "mm", "mm.py", registers=200, spills=0)  # the cubin's, as read here
    assert (on_the_cpu.registers, on_the_cpu.spill_bytes) == (200, 0)


def _readings(tests, parts) -> set[str]:
    return {r["code"] for t in tests if t.part in parts for k in t.metrics.get("kernels", ()) for r in k["readings"]}


def _reading_submissions() -> list:
    found = []
    for path in sorted(SUBMISSIONS.glob("*/*/expect.toml")) + sorted((TESTS / "corpus").glob("*/expect.toml")):
        expect = tomllib.loads(path.read_text())
        if expect.get("readings"):
            found.append(pytest.param(path.parent, expect, id=f"{path.parent.parent.name}/{path.parent.name}"))
    return found


@pytest.mark.parametrize(("folder", "expect"), _reading_submissions())
def test_each_reading_is_earned_by_its_submission_and_not_by_the_solution(folder, expect, tmp_path, solutions):
    assert set(expect["readings"]) <= set(compiled_kernels.READINGS), f"{folder.name}: unknown reading"
    assignment = expect.get("assignment", folder.parent.name)
    [spec] = load_assignments([assignment])
    parts = expect.get("parts") or [p.name for p in spec.parts]
    submission, cache = known_wrong(folder, tmp_path), None
    if submission != folder:  # an edit of the solution: its other kernels come compiled
        cache = tmp_path / "compiled"
        solutions.seed(assignment, compile_cache.folder_for(cache, str(submission), assignment, submission / assignment))
    # The first case of each part the bug is in launches the kernel that earns the reading (a CUDA
    # part's reading comes from its build): the other cases would only add minutes of interpreting.
    first = [dataclasses.replace(p, cases=tuple(c for c in p.cases if c.runs_on("cpu"))[:1] or p.cases[:1])
             for p in spec.parts if p.name in parts]  # fmt: skip
    result = grade_submission(submission, [dataclasses.replace(spec, parts=tuple(first))], Settings("cpu", cache=cache))
    found = _readings(result.tests, parts)
    missing = set(expect["readings"]) - found
    assert not missing, f"{folder.name}: the report does not read {missing} (it reads {found or 'nothing'})"
    html = report.render_html(result)
    for code in expect["readings"]:
        assert f'data-reading="{code}"' in html
    earned = set(expect["readings"]) & _readings(solutions.grade(assignment).tests, parts)
    assert not earned, f"the solution of {assignment} earns {earned} too: the reading proves nothing"


def test_the_solutions_report_shows_every_kernel_on_the_grading_gpu(solutions):
    """Done when: the CPU-tier report of solutions/ shows each kernel's registers, spills, shared
    memory and occupancy for the grading GPU, for every part that runs or builds a kernel there."""
    names = [a.name for a in load_assignments()]
    graded = solutions.grade_all(names)
    for assignment in load_assignments():
        for part in assignment.parts:
            tests = [t for t in graded.tests if t.assignment == assignment.name and t.part == part.name]
            kernels = [k for t in tests for k in t.metrics.get("kernels", ())]
            assert kernels, f"{assignment.name}/{part.name}: no compiled kernel in its metrics"
            for kernel in kernels:
                # Spills are shown where they are: flash_attention's float32 kernels spill at D = 128.
                assert kernel["registers"] > 0 and kernel["spill_bytes"] >= 0, (part.name, kernel)
                assert "blocks_per_sm" in kernel["occupancy"], (part.name, kernel["kernel"], kernel["occupancy"])
                assert kernel["occupancy"]["blocks_per_sm"] >= 1 and kernel["occupancy"]["limited_by"]
    html = report.render_html(graded)
    for assignment in names:
        assert f'id="{assignment}-kernels"' in html
    assert "registers / thread" in html and "occupancy per SM" in html


@pytest.mark.gpu
@requires_gpu
def test_the_gpu_tier_reads_the_spilling_tile_too(tmp_path):
    """On the GPU the launch hook's compiled kernels (the driver's registers and spills) give the
    same reading, on the correctness cases and the timed ones."""
    folder = SUBMISSIONS / "matmul" / "tile_too_large_for_registers"
    result = grade(known_wrong(folder, tmp_path), ["matmul"], device="cuda", parts=["matmul"])
    for kind in ("correctness", "performance"):
        tests = [t for t in result.tests if t.kind == kind]
        assert "spills" in _readings(tests, ["matmul"]), kind
    solution = grade(REPO_ROOT / "solutions", ["softmax"], device="cuda")
    for test in solution.tests:
        if test.kind in ("correctness", "performance"):
            assert test.metrics["kernels"] and all(k["registers"] > 0 for k in test.metrics["kernels"]), test.name
