"""Not a test: what test_precompile.py runs in a fresh process to stand for the GPU tier's child.

Outside the interpreter (no TRITON_INTERPRET), every Triton launch of an assignment's calls on
the GPU tier's shapes (its cases there and its benchmarks) goes through Triton's own
`JITFunction.run`, as in the GPU tier's child: its binder, its cache key and `triton.compile`, for
the H100/H200 target. Without a GPU only the launch itself is left out (each run is a warmup),
the calls get zeros laid out as the graded inputs, and the driver and torch.cuda answer as that
GPU would (child/dry_run.py's answers), so that code written for a GPU takes its GPU path. With
`--gpu`, on a GPU, nothing stands in: the inputs are the graded ones, on the GPU, and every
kernel runs (an autotuner times its configs). Usage:

    TRITON_CACHE_DIR=folder python tests/real_jit.py ASSIGNMENT SUBMISSION [--gpu]

prints one JSON line: each compiled kernel's key (CompiledKernel.hash, in launch order), how
many compiles found Triton's cache holding them already (Triton's own compilation listener says),
and the key under which Triton's own launcher class would look for each kernel's launcher in the
cache (`launchers`: its `compile_module_from_src` caught before it builds anything).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's grader, wherever run from

import torch  # noqa: E402
import triton.testing  # noqa: E402
from triton import knobs  # noqa: E402
from triton.runtime import driver  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from grader.assignment import cases  # noqa: E402
from grader.assignment.loading import load_assignments  # noqa: E402
from grader.child import dry_run  # noqa: E402
from grader.child.interpreter import TargetDriver  # noqa: E402
from grader.child.submission import load_module  # noqa: E402
from grader.child.target import TARGET  # noqa: E402


def stand_in_for_the_gpu() -> None:
    """The driver and torch.cuda answer as the grading GPU; every benchmarker runs a config once
    and times nothing, so an autotuner keeps its first config (on a GPU the pick is the fastest,
    which only a GPU knows; the pass compiles every config); every launch compiles, none runs."""
    driver.set_active(TargetDriver(TARGET))
    once = driver.active.get_benchmarker()
    triton.testing.do_bench = triton.testing.do_bench_cudagraph = once
    dry_run.answer_as_the_gpu(TARGET)
    run = JITFunction.run
    JITFunction.run = lambda self, *args, grid, warmup, **kwargs: run(self, *args, grid=grid, warmup=True, **kwargs)


def launcher_keys() -> list[str]:
    """Each compiled kernel's launcher key, in launch order, as Triton's CudaLauncher asks its
    cache for it (the source it generated, hashed with the platform as Triton's build does)."""
    import hashlib
    from types import SimpleNamespace

    from triton.backends.nvidia import driver as nvidia
    from triton.runtime.build import platform_key

    keys: list[str] = []

    def caught(src, name, **ignored):
        keys.append(hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest())
        return SimpleNamespace(launch=None)

    nvidia.compile_module_from_src = caught
    nvidia.library_dirs = lambda: []  # libcuda's folder: none on a machine without a GPU
    run = JITFunction.run

    def launching(self, *args, **kwargs):
        kernel = run(self, *args, **kwargs)
        nvidia.CudaLauncher(kernel.src, kernel.metadata)
        return kernel

    JITFunction.run = launching
    return keys


def main(assignment_name: str, submission: Path, gpu: bool = False) -> dict:
    assert not knobs.runtime.interpret, "run without TRITON_INTERPRET: this stands for the GPU tier's child"
    if not gpu:
        stand_in_for_the_gpu()
    found: dict = {"keys": [], "hits": 0, "misses": 0}

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        found["hits" if cache_hit else "misses"] += 1

    knobs.compilation.listener = listener
    run = JITFunction.run

    def noting(self, *args, **kwargs):
        kernel = run(self, *args, **kwargs)
        found["keys"].append(kernel.hash)
        return kernel

    JITFunction.run = noting
    found["launchers"] = [] if gpu else launcher_keys()
    (assignment,) = load_assignments([assignment_name])
    for part in assignment.parts:
        shapes = cases.launched_on(part, "cuda")
        if shapes:
            module = load_module(submission / assignment.name / part.file, f"graded_{part.name}")
            for case in shapes:
                inputs = cases.make_inputs(assignment, part, case, 0, "cuda") if gpu else cases.zeros_shaped_as(
                    assignment, part, case)  # fmt: skip
                with torch.no_grad():
                    getattr(module, part.entry)(**inputs)
                del inputs
    return found


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]), gpu="--gpu" in sys.argv[3:])))
