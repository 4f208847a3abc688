"""A correctness child's autotuner times its configs briefly (grader/child/correctness_autotune.py).

Each check runs in a fresh Python, since the patch changes Triton's Autotuner class for the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import TESTS, requires_gpu
from grader.child import correctness_autotune

REPO = TESTS.parent

# An Autotuner over three configs of a stand-in kernel that records each launch's BLOCK, with
# triton.testing.do_bench replaced by a recorder that "times" BLOCK 1024 fastest.
PRELUDE = """
import json
import triton, triton.testing
from triton.runtime.autotuner import Autotuner
from grader.child import correctness_autotune

launches, budgets = [], []

def do_bench(kernel_call, warmup=25, rep=100, quantiles=None, **ignored):
    budgets.append((warmup, rep))
    kernel_call()
    ms = 1.0 if launches[-1] == 1024 else 2.0
    return [ms] * len(quantiles) if quantiles else ms

triton.testing.do_bench = do_bench

def kernel_body(x, n, BLOCK):
    pass

class Kernel:
    fn = staticmethod(kernel_body)
    def run(self, *args, BLOCK, **meta):
        launches.append(BLOCK)

configs = [triton.Config({"BLOCK": block}) for block in (256, 1024, 64)]

def error_of(call):
    try:
        call()
    except Exception as error:
        return f"{type(error).__name__}: {error}"[:200]
    return ""
"""


def run(body: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_new_key_times_every_config_on_brief_budgets_and_keeps_the_fastest():
    result = run("""
        correctness_autotune.install()
        tuner = Autotuner(Kernel(), ["x", "n"], configs, ["n"], None, None)
        tuner.run(0, 100)
        tuner.run(0, 100)
        tuner.run(0, 7)
        print(json.dumps({"launches": launches, "budgets": budgets}))
    """)
    # A new key: every config once through the benchmarker, then the pick; a key seen before: the pick.
    assert result["launches"] == [256, 1024, 64, 1024, 1024, 256, 1024, 64, 1024]
    assert result["budgets"] == [[correctness_autotune.WARMUP_MS, correctness_autotune.REP_MS]] * 6
    assert correctness_autotune.WARMUP_MS < 25 and correctness_autotune.REP_MS < 100


def test_a_benchmarker_given_to_the_decorator_is_replaced_by_the_brief_one_too():
    """The student's benchmarker picks the timing child's config; here it would cost its own budgets
    (one that replays CUDA graphs ten times over 100 ms: a second a config)."""
    result = run("""
        correctness_autotune.install()
        mine = []
        def own(kernel_call, quantiles=None):
            mine.append(1)
            kernel_call()
            return [1.0, 1.0, 1.0]
        tuner = Autotuner(Kernel(), ["x", "n"], configs, ["n"], None, None, do_bench=own)
        tuner.run(0, 100)
        print(json.dumps({"own": len(mine), "triton": len(budgets), "pick": launches[-1]}))
    """)
    assert result == {"own": 0, "triton": 3, "pick": 1024}


def test_without_it_the_autotuner_asks_the_driver_for_triton_s_own_benchmarker():
    """What the patch replaces: on this machine, with no GPU, Triton's own default fails; with one,
    it is do_bench on Triton's budgets (25 and 100 ms)."""
    result = run("""
        tuner = Autotuner(Kernel(), ["x", "n"], configs, ["n"], None, None)
        print(json.dumps({"error": error_of(lambda: tuner.run(0, 100)), "budgets": budgets}))
    """)
    assert result["budgets"] in ([], [[25, 100]] * 3), result
    assert result["error"] or result["budgets"] == [[25, 100]] * 3


@requires_gpu
@pytest.mark.gpu
def test_on_the_gpu_the_configs_run_a_fraction_as_often(tmp_path):
    """A real kernel autotuned on the GPU: Triton's budgets launch a short kernel's configs of a new
    key over a thousand times in all (1,300 on an H100, the first config fewer: the GPU's clocks
    were still low when its run time was estimated); the brief ones, under a quarter as many."""
    code = """
        import json, torch, triton, triton.language as tl
        from grader.child import correctness_autotune
        if BRIEF:
            correctness_autotune.install()
        counts = {}
        def count(meta):
            counts[meta["BLOCK"]] = counts.get(meta["BLOCK"], 0) + 1
        @triton.autotune(configs=[triton.Config({"BLOCK": b}, pre_hook=count) for b in (256, 1024)], key=["n"])
        @triton.jit
        def add(x, y, out, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)
        x = torch.randn(1 << 20, device="cuda")
        y, out = torch.randn_like(x), torch.empty_like(x)
        add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())
        torch.cuda.synchronize()
        print(json.dumps({"counts": counts, "right": bool(torch.equal(out, x + y))}))
    """
    found = {}
    for brief in (False, True):
        script = tmp_path / f"tune_{brief}.py"  # a file: @triton.jit reads its kernel's source
        script.write_text(textwrap.dedent(code).replace("BRIEF", str(brief)))
        done = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        found[brief] = json.loads(done.stdout.strip().splitlines()[-1])
    assert found[True]["right"] and found[False]["right"]
    triton_s, brief = sum(found[False]["counts"].values()), sum(found[True]["counts"].values())
    assert triton_s > 500 and brief < triton_s / 4, found
