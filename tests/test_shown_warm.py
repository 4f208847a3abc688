"""A shown baseline's child (running/shown_figures.py) compiles each shown torch.compile baseline
before its timed phase (child/main.py `_warm_baselines`), so that the compile inside the phase,
afresh per benchmark, finds inductor's graph in the compiler cache instead of making it while the
GPU is held alone; a timing child of a student's compiles none. Checked on the CPU, where
inductor compiles too: the same cache, the same counters."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

from grader.assignment.spec import REPO_ROOT

# In a process of its own: inductor's state and counters are per process. With `warm`, the
# child's warm-up runs first; then the timed phase's compile, as timing.shown_baseline makes it.
PROBE = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
import torch
import torch._dynamo
from torch._dynamo.utils import counters
from grader.assignment import cases
from grader.child import main
from grader.assignment.loading import load_assignment

warm, folder = sys.argv[1] == "warm", sys.argv[2]
assignment = load_assignment(Path(folder))
part = next(p for p in assignment.parts if p.shown and p.shown.compiled)
index = 0
task = SimpleNamespace(kind="shown", part=part.name, index=index, seed=7)
job = SimpleNamespace(device="cuda", assignment_dir=folder, tasks=[task])
loaded, shown = main._compiled_baselines(job, main._benchmarks(job))
assert shown == [task] and [p.name for p in loaded.parts] == [p.name for p in assignment.parts]
timed = SimpleNamespace(kind="bench", part=part.name, index=index, seed=7)
assert main._compiled_baselines(SimpleNamespace(device="cuda", assignment_dir=folder, tasks=[timed]), [timed])[1] == []
if warm:
    main._warm_baselines(loaded, [task], shown, device="cpu")
counters.clear()
inputs = cases.make_inputs(assignment, part, part.benchmarks[index], 8, "cpu")
with torch.no_grad():
    torch._dynamo.reset()
    torch.compile(cases.function(assignment, part.shown.function), dynamic=False)(**inputs)
print(json.dumps(dict(counters["inductor"])))
"""


def test_the_timed_phases_compile_of_a_shown_baseline_finds_the_warmed_graph(tmp_path):
    # GELU's own files, its benchmarks a thousand times smaller: inductor compiles the same graph.
    folder = tmp_path / "gelu"
    shutil.copytree(REPO_ROOT / "assignments" / "gelu", folder)
    spec = (folder / "assignment.toml").read_text()
    assert spec.count('benchmarks = ["float32 67108864", "bfloat16 67108864"]') == 1
    (folder / "assignment.toml").write_text(spec.replace('"float32 67108864", "bfloat16 67108864"', '"float32 65536"'))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE, "warm", str(folder)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # Without the warm-up (the probe's argument "cold") the same compile counts a fxgraph_cache_miss, no hit.
    assert found.get("fxgraph_cache_hit", 0) >= 1 and not found.get("fxgraph_cache_miss"), found


def test_the_reference_is_warmed_once_per_part_on_its_first_benchmark(monkeypatch):
    """The warm-up runs while the child holds the GPU beside other gradings, which keeps every timed
    phase waiting: one call of torch's reference per part (its first benchmark's shape), not one
    per shape (softmax's eight, up to 16384 x 16384)."""
    from types import SimpleNamespace

    from grader.assignment import cases
    from grader.assignment.loading import load_assignments
    from grader.child import main

    (assignment,) = load_assignments(["softmax"])
    part = assignment.parts[0]
    assert len(part.benchmarks) > 1
    tasks = [SimpleNamespace(kind="bench", part=part.name, index=i, seed=i) for i in range(len(part.benchmarks))]
    shapes, calls = [], []
    make_inputs, function = cases.make_inputs, cases.function
    monkeypatch.setattr(cases, "make_inputs", lambda a, p, case, *rest: shapes.append(case.shape) or make_inputs(
        a, p, dataclasses.replace(case, shape=[8, 16]), *rest))  # fmt: skip

    def counted(a, name):
        found = function(a, name)
        return (lambda **inputs: calls.append(name) or found(**inputs)) if name == part.baseline else found

    monkeypatch.setattr(cases, "function", counted)
    main._warm_baselines(assignment, tasks, [], device="cpu")
    assert calls == [part.baseline] and shapes == [part.benchmarks[0].shape]
