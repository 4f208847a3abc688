"""What one grading compiles, the next grading of the very same files finds (compile_cache.py).

Per owner and assignment there is one folder, keyed by the submission's files: a changed file
starts an empty one and removes the old, another owner never shares it, and a grading says in its
phases line whether it found an earlier grading's kernels. A real CPU-tier grading, twice, shows
that the children's Triton cache is that folder (the kernels compiled for the GPU target land in
it) and that the second grading reports it warm with the same verdicts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import requires_gpu
from grader.running import compile_cache, isolation
from grader.grading import Settings, grade_submission
from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT


def _submission(root: Path, text: str = "") -> Path:
    shutil.copytree(REPO_ROOT / "solutions" / "vector_add", root / "vector_add")
    if text:
        source = root / "vector_add" / "vector_add.py"
        source.write_text(text + source.read_text())
    return root


def test_one_folder_per_owner_and_files(tmp_path):
    cache, student = tmp_path / "cache", _submission(tmp_path / "a")
    first = compile_cache.folder_for(cache, "alice", "vector_add", student / "vector_add")
    assert not compile_cache.is_warm(first)
    (first / "kernel.cubin").write_bytes(b"x")
    again = compile_cache.folder_for(cache, "alice", "vector_add", student / "vector_add")
    assert again == first and compile_cache.is_warm(again), "the same files find the same folder"
    assert compile_cache.folder_for(cache, "bob", "vector_add", student / "vector_add") != first, "never shared"
    (student / "vector_add" / "vector_add.py").write_text("# changed\n")
    changed = compile_cache.folder_for(cache, "alice", "vector_add", student / "vector_add")
    assert changed != first and not compile_cache.is_warm(changed)
    assert not first.exists(), "the owner's folder of the old files is removed"
    assert sorted(p.name for p in changed.parent.iterdir()) == [changed.name]


def test_links_and_python_caches_do_not_change_the_key(tmp_path):
    student = _submission(tmp_path / "a") / "vector_add"
    before = compile_cache.files_digest(student)
    (student / "__pycache__").mkdir()
    (student / "__pycache__" / "vector_add.cpython-312.pyc").write_bytes(b"\0")
    (student / "link.py").symlink_to(REPO_ROOT / "solutions" / "softmax" / "softmax.py")
    assert compile_cache.files_digest(student) == before, "the grader never reads either"
    (student / "notes.txt").write_text("a file the child can read")
    assert compile_cache.files_digest(student) != before


def test_a_second_grading_of_the_same_files_finds_the_kernels_of_the_first(tmp_path):
    cache, student = tmp_path / "cache", _submission(tmp_path / "student", "# student 1\n")
    settings = Settings(device="cpu", cache=cache, owner="student 1")
    (assignment,) = load_assignments(["vector_add"])
    first = grade_submission(student, [assignment], settings)
    (folder,) = (cache / p for p in cache.rglob("*") if p.is_dir() and p.parent.name == "vector_add")
    compiled = [p for p in folder.rglob("*") if p.suffix in (".cubin", ".ptx", ".ttir")]
    assert compiled, "the children's Triton cache is the grading's folder (kernels compiled for the GPU target)"
    second = grade_submission(student, [assignment], settings)
    assert "earlier grading" not in first.environment["phases"]
    assert "kernels compiled by an earlier grading of these files" in second.environment["phases"]
    verdicts = [[(t.name, t.reason, t.score) for t in g.tests] for g in (first, second)]
    assert verdicts[0] == verdicts[1] and first.score == second.score > 0


def test_an_unwritable_cache_folder_costs_only_the_warmth(tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    (assignment,) = load_assignments(["vector_add"])
    result = grade_submission(_submission(tmp_path / "s"), [assignment], Settings(device="cpu", cache=blocked))
    assert result.score > 0 and "earlier grading" not in result.environment["phases"]


# Triton's own cache, as a child of the given kind finds it through its environment: put a file,
# then say which of the named files the same key finds.
CACHE_USE = """
import json, sys
from triton import knobs
from triton.runtime.cache import get_cache_manager
cache = get_cache_manager("0" * 64)
for name, text in json.loads(sys.argv[1]).items():
    cache.put(text, name, binary=False)
print(json.dumps({"manager": type(cache).__name__,
                  "found": {name: cache.get_file(name) is not None for name in json.loads(sys.argv[2])}}))
"""


def _child_env(compiled: Path, timed: bool) -> dict[str, str]:
    """A GPU-tier child's environment around the compilers' cache `compiled`."""
    env = isolation.child_environment("cuda", compiled.parent, compiled, timed=timed)
    env["PYTHONPATH"] = str(REPO_ROOT)  # Triton imports the timed picks' manager by name, as in a child
    return env


def _cache_use(compiled: Path, timed: bool, put: dict, look: list) -> dict:
    env = _child_env(compiled, timed)
    ran = subprocess.run([sys.executable, "-c", CACHE_USE, json.dumps(put), json.dumps(look)], env=env,
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_a_timing_childs_autotuner_picks_are_its_own_and_its_kernels_are_shared(tmp_path):
    """A correctness child's picks were timed beside other students' work (gpu_lock.py): through
    Triton's own cache, a timing child neither finds them nor lets a correctness child find its
    own, while both find each other's compiled kernels; the next timing child finds its picks."""
    compiled = tmp_path / "compiled"
    compiled.mkdir()
    pick = {"kernel.autotune.json": '{"key": [1], "configs_timings": []}'}
    checking = _cache_use(compiled, False, {**pick, "kernel.cubin": "c"}, [])
    timed = _cache_use(compiled, True, {"other.cubin": "t"}, ["kernel.autotune.json", "kernel.cubin"])
    assert checking["manager"] == "FileCacheManager" and timed["manager"] == "TimedPicks"
    assert timed["found"] == {"kernel.autotune.json": False, "kernel.cubin": True}
    _cache_use(compiled, True, pick, [])
    again = _cache_use(compiled, True, {}, ["kernel.autotune.json", "other.cubin"])
    assert again["found"] == {"kernel.autotune.json": True, "other.cubin": True}
    picks = sorted(p.name for p in compiled.rglob("*.autotune.json"))
    assert picks == ["kernel.autotune.json", "timed-kernel.autotune.json"]


AUTOTUNED = """
import torch, triton, triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (256, 1024)], key=["n"])
@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) + tl.load(y + offs, mask=offs < n), mask=offs < n)

x = torch.ones(1 << 20, device="cuda")
out = torch.empty_like(x)
add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, x, out, x.numel())
print("tuned" if hasattr(add, "bench_time") else "found")
"""


# The same, with a pre_hook on each config, and the kept timings of a GPU-tier child (hooked_picks.py).
HOOKED_AUTOTUNED = "from grader.child import hooked_picks\nhooked_picks.install()\n" + AUTOTUNED.replace(
    "triton.Config({\"BLOCK\": b})", "triton.Config({\"BLOCK\": b}, pre_hook=lambda meta: None)")


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("source", [AUTOTUNED, HOOKED_AUTOTUNED], ids=["plain", "pre_hook"])
def test_a_regrades_timing_child_times_the_configs_the_first_picked(tmp_path, source):
    """On a GPU, a real autotuner: a timing child tunes once and the next timing child of the same
    files finds its picks; a correctness child tunes for itself. So with configs that carry a
    pre_hook, whose timings Triton itself does not keep."""
    compiled, script = tmp_path / "compiled", tmp_path / "tuned.py"
    compiled.mkdir()
    script.write_text(source)  # Triton reads a kernel's source from its file

    def run(timed: bool) -> str:
        ran = subprocess.run([sys.executable, str(script)], env=_child_env(compiled, timed), capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        return ran.stdout.strip().splitlines()[-1]

    assert [run(True), run(True), run(False), run(False)] == ["tuned", "found", "tuned", "found"]


# An autotuner whose configs carry a pre_hook (the matmul solution's tensor descriptors take their
# tiles' shapes from one), asked for its kept timings as Triton's Autotuner.run asks, without a GPU:
# the driver stands for the grading GPU and the timings are made up.
HOOKED = """
import json, sys
import triton, triton.language as tl
from triton.runtime import driver
from grader.child import hooked_picks
from grader.child.interpreter import TargetDriver
from grader.child.target import TARGET

driver.set_active(TargetDriver(TARGET))
if sys.argv[1] == "kept":
    hooked_picks.install()

def tile_shapes(meta):
    pass

@triton.jit
def kernel(x, n, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n)

configs = [triton.Config({"BLOCK": b}, pre_hook=tile_shapes) for b in (64, 128)]
tuner = triton.autotune(configs=configs, key=["n"])(kernel)
timed = []

def bench():
    timed.append(1)
    tuner.configs_timings = {configs[0]: [2.0, 2.0, 2.0], configs[1]: [1.0, 1.0, 1.0]}
    tuner.cache[(5,)] = configs[1]

found = tuner.check_disk_cache((5,), configs, bench)
pick = tuner.cache[(5,)]
print(json.dumps({"timed": bool(timed), "pick": pick.kwargs["BLOCK"], "hook": pick.pre_hook is tile_shapes}))
"""


@pytest.mark.parametrize("kept", [True, False])
def test_an_autotuners_timings_are_kept_for_configs_with_a_pre_hook_too(tmp_path, kept):
    """Triton keeps no timings for an autotuner whose configs carry a pre_hook: such an autotuner
    timed its configs again in every grading, warm ones included, and a regrade could time another
    config. A GPU-tier child keeps them (child/hooked_picks.py): the next child with the same key
    finds the pick, given back its own pre_hook. Triton's own autotuner (`kept` off) times again."""
    compiled, script = tmp_path / "compiled", tmp_path / "hooked.py"
    compiled.mkdir()
    script.write_text(HOOKED)  # Triton reads a kernel's source from its file

    def run() -> dict:
        ran = subprocess.run([sys.executable, str(script), "kept" if kept else "triton's"],
                             env=_child_env(compiled, False), capture_output=True, text=True, timeout=300)  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-2000:]
        return json.loads(ran.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first == {"timed": True, "pick": 128, "hook": True}
    assert second == {"timed": not kept, "pick": 128, "hook": True}
    assert bool(list(compiled.rglob("*.autotune.json"))) == kept


def test_what_a_submission_plants_in_the_cache_is_gone_at_its_next_grading(tmp_path):
    """Issue 41, 9: torch.save and a shared torch.from_file wrote past the guard's `open` check,
    and a file planted in the persistent compile cache was there at the next grading. No child
    sees that folder: a grading starts from a copy, and this process keeps only what has the
    layout of Triton's own cache, so whatever a submission writes (here in a key folder of
    Triton's too, under a compiler's suffix) goes with its grading."""
    cache, submission = tmp_path / "cache", tmp_path / "student"
    shutil.copytree(REPO_ROOT / "tests" / "submissions" / "vector_add" / "plants_in_the_compile_cache" / "vector_add",
                    submission / "vector_add")  # fmt: skip
    # The guard refuses each of these writes (test_guard.py); this test is of the wall behind it, so
    # the submission runs as one that beat the guard would: in full control of its process.
    settings = Settings(device="cpu", cache=cache, owner="planter", unguarded=True)
    (assignment,) = load_assignments(["vector_add"])
    first = grade_submission(submission, [assignment], settings)
    said = [t.output for t in first.tests if t.kind == "correctness" and t.reason != "ok"]  # the first case is right
    assert said and all(re.search(r"planted [1-9]\d* file", text) for text in said), said[0]
    (kept,) = (p for p in cache.rglob("*") if p.is_dir() and p.parent.name == "vector_add")
    assert compile_cache.is_warm(kept), "the kernel it compiled is kept"
    assert not list(kept.rglob("planted-*")), sorted(kept.rglob("planted-*"))
    second = grade_submission(submission, [assignment], settings)
    found = [t.output for t in second.tests if t.kind == "correctness" and t.reason != "ok"]
    assert "kernels compiled by an earlier grading of these files" in second.environment["phases"]
    assert found and all("none planted by an earlier grading was here" in text for text in found), found[0]


def test_only_the_layout_of_tritons_cache_is_kept(tmp_path):
    """What `keep` takes from a grading's cache: in a key folder, a group file whose every listed
    file lies beside it under its own name with a compiler's suffix, those files, and the
    autotuner's picks; never a shared library (Triton rebuilds its launchers), a file no group
    lists, a group naming a file elsewhere, a link, a half-written entry, or torch.compile's cache."""
    compiled, kept = tmp_path / "compiled", tmp_path / "kept"
    good, forged = compiled / ("A" * 52), compiled / ("B" * 52)
    for folder in (good, forged, compiled / "torchinductor" / "fxgraph", good / "tmp.pid_1_x"):
        folder.mkdir(parents=True)
    for name in ("k.json", "k.ttir", "k.cubin", "k.autotune.json", "timed-k.autotune.json", "stray.json", "k.so",
                 "tmp.pid_1_x/k.cubin", "../torchinductor/fxgraph/graph.py"):  # fmt: skip
        (good / name).write_text(name)
    (good / "link.cubin").symlink_to(good / "k.cubin")
    listed = ("k.json", "k.ttir", "k.cubin")
    (good / "__grp__k.json").write_text(json.dumps({"child_paths": {n: str(good / n) for n in listed}}))
    (forged / "x.cubin").write_text("x")
    (forged / "__grp__x.json").write_text(json.dumps({"child_paths": {"x.cubin": str(forged / "x.cubin"),
                                                                      "secret": "/etc/shadow"}}))  # fmt: skip
    compile_cache.keep(compiled, kept)
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file()) == sorted(
        f"{'A' * 52}/{n}" for n in ("__grp__k.json", "k.json", "k.ttir", "k.cubin", "k.autotune.json",
                                    "timed-k.autotune.json"))  # fmt: skip
    restored = tmp_path / "restored"
    compile_cache.restore(kept, restored)
    group = json.loads((restored / ("A" * 52) / "__grp__k.json").read_text())["child_paths"]
    assert group == {n: str(restored / ("A" * 52) / n) for n in listed}, "Triton finds the copies"


def test_a_grading_that_changed_nothing_keeps_the_kept_files_and_one_that_did_keeps_its_own(tmp_path):
    """`keep` after a `restore` whose files no child touched leaves the kept folder as it was (the
    very files: nothing copied); a file written, replaced or added since is kept as the grading left it."""
    key = "A" * 52
    kept, compiled = tmp_path / "kept", tmp_path / "compiled"
    (kept / key).mkdir(parents=True)
    for name in ("k.json", "k.cubin"):
        (kept / key / name).write_text(name)
    (kept / key / "__grp__k.json").write_text(json.dumps({"child_paths": {n: str(kept / key / n)
                                                                          for n in ("k.json", "k.cubin")}}))
    inodes = {p.name: p.stat().st_ino for p in (kept / key).iterdir()}
    restored = compile_cache.restore(kept, compiled)
    compile_cache.keep(compiled, kept, restored)
    assert {p.name: p.stat().st_ino for p in (kept / key).iterdir()} == inodes, "an untouched cache is not copied"
    for change, cubin in (("rewritten", "rewritten"), ("replaced", "replaced"), ("added", "replaced")):
        compiled = tmp_path / change
        restored = compile_cache.restore(kept, compiled)
        if change == "rewritten":
            (compiled / key / "k.cubin").write_text("rewritten")
        elif change == "replaced":
            (compiled / key / "new").write_text("replaced")
            (compiled / key / "new").rename(compiled / key / "k.cubin")
        else:
            (compiled / ("B" * 52)).mkdir()
            (compiled / ("B" * 52) / "x.autotune.json").write_text("{}")
        compile_cache.keep(compiled, kept, restored)
        assert (kept / key / "k.cubin").read_text() == cubin, change
        assert (change == "added") == (kept / ("B" * 52) / "x.autotune.json").is_file(), change


def test_the_launchers_a_phase_built_are_counted_and_shown(tmp_path):
    """Triton's launchers (`<key>/<name>.so`, a gcc run each) are counted per phase from the grading's
    cache, and the phases line says how many each phase built: a timed phase that builds them
    spends its exclusive hold on gcc. Nothing else in the folder counts, nor a link posing as a key."""
    from grader.running.tasks import Phases

    for key in ("AAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBB"):
        (tmp_path / key).mkdir()
        (tmp_path / key / "__triton_launcher.so").write_bytes(b"")
        (tmp_path / key / "kernel.cubin").write_bytes(b"")
    (tmp_path / "planted.so").write_bytes(b"")
    (tmp_path / "elsewhere").symlink_to(tmp_path / "AAAAAAAAAAAAAAAAAAAA")
    before = {"AAAAAAAAAAAAAAAAAAAA/__triton_launcher.so"}
    assert compile_cache.launchers(tmp_path) - before == {"BBBBBBBBBBBBBBBBBBBB/__triton_launcher.so"}
    assert compile_cache.launchers(tmp_path / "missing") == set()
    phases = Phases(correctness=1.0, timing=2.0)
    phases.launchers.update(correctness=0, timing=2)
    assert phases.line().endswith("(launchers built: 2 in timing)"), phases.line()
    phases.launchers["timing"] = 0
    assert "launchers" not in phases.line()
