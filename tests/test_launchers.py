"""Triton's launchers built by the grading process ahead of its children (grader/running/launchers.py):
each under the key Triton's own launcher class looks for, found there instead of built again.

Real parts: the precompile pass's sandboxed recording child over real submissions, real gcc, and,
standing for the GPU tier's child, a fresh process launching through Triton's own JITFunction and
CudaLauncher outside the interpreter (real_jit.py), its build caught before gcc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest
from triton.runtime import build as triton_build

from grader.assignment.loading import load_assignments
from grader.assignment.spec import REPO_ROOT
from grader.grading import AssignmentGrading, Settings
from grader.messages.specializations import Argument, Specialization
from grader.running import launchers, precompile
from test_precompile import AUTOTUNED, _real_jit, _submission


def _recorded(submission, name: str) -> list[Specialization]:
    """What the pass's recording child foresees of the GPU tier for `name`."""
    (assignment,) = load_assignments([name])
    grading = AssignmentGrading(assignment, submission, Settings(device="cpu", precompile=0))
    try:
        ahead = precompile.Precompile(grading.job, assignment, "cuda", grading.workdir, grading.view, grading.compiled,
                                      300.0, 2)  # fmt: skip
        return sum(ahead.record(), [])  # the cases' and the benchmarks' own
    finally:
        grading.scratch.remove()


@pytest.mark.parametrize("name", ["vector_add", "gelu", pytest.param("matmul", marks=pytest.mark.slow)])
def test_the_keys_are_those_tritons_launcher_class_looks_for(tmp_path, name):
    """For every kernel the GPU tier's child compiles, Triton's CudaLauncher asks its cache for the
    launcher under a key; the keys worked out from what the pass recorded are those, and, for a
    kernel of tensor descriptors (matmul's), the other way its compile may pass them too."""
    submission = _submission(tmp_path / "student", AUTOTUNED) if name == "vector_add" else REPO_ROOT / "solutions"
    specs = _recorded(submission, name)
    ours = {key for spec in specs if launchers.kinds(spec) is not None for key, _ in launchers.sources(launchers.kinds(spec))}
    found = _real_jit(submission, tmp_path / "cache", name)
    assert found["launchers"] and set(found["launchers"]) <= ours, (ours, found["launchers"])
    described = [spec for spec in specs if any(a.type.startswith("tensordesc") for a in spec.arguments)]
    other_way = {tuple(launchers.kinds(spec)) for spec in described}
    assert len(ours - set(found["launchers"])) == len(other_way), "one more for each kind of descriptors' signature"
    assert bool(described) == (name == "matmul")


GATE = """
import json, sys
sys.path.insert(0, "tests")
import real_jit, torch
real_jit.stand_in_for_the_gpu()
keys = real_jit.launcher_keys()
from grader.child import gate
gate._held[(1,)](torch.zeros(2, dtype=torch.int32), gate.TIMEOUT_NS, num_warps=1)
print(json.dumps(keys))
"""


def test_the_harness_gates_launcher_is_the_one_triton_looks_for(tmp_path):
    """The gate (grader/child/gate.py), launched as every timing child launches it, through Triton's
    own JITFunction outside the interpreter: its launcher's key is the one built ahead."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", GATE], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    caught = json.loads(done.stdout.strip().splitlines()[-1])
    assert caught == [launchers.source(list(kinds))[0] for kinds in launchers.HARNESS_KINDS]


def test_a_pointer_of_any_element_type_makes_the_same_source():
    def spec(*types: str) -> Specialization:
        return Specialization("add", "k", "k.py", 1, [Argument(f"a{i}", t) for i, t in enumerate(types)])

    keys = {launchers.source(launchers.kinds(spec(t, "i32", "constexpr")))[0] for t in ("*fp16", "*bf16", "*i8", "*kfp32")}
    assert len(keys) == 1
    assert launchers.source(launchers.kinds(spec("*fp16", "i64")))[0] not in keys
    # A tensor descriptor by its dimensions alone, two sources (the ways its compile may pass it).
    described = {launchers.kinds(spec("*fp16", t))[1] for t in ("tensordesc<fp16[64, 64]>", "tensordesc<bf16[128,32]>")}
    assert described == {"tensordesc<i8[1, 1]>"}
    assert len({key for key, _ in launchers.sources(["*i8", *described])}) == 2
    assert launchers.kinds(spec("tensordesc<fp32[8, 8, 8]>")) == ["tensordesc<i8[1, 1, 1]>"]
    # What the launcher would make of anything else is left to Triton, in the child.
    for odd in ("nvTmaDesc", "[*fp32,*fp32]", "*fp16; system()", "i32 x", "tensordesc<fp16[64, 64]>; x", "tensordesc<fp16[]>"):
        assert launchers.kinds(spec("*fp16", odd)) is None


@pytest.fixture
def stub_libcuda(tmp_path, monkeypatch):
    """A libcuda.so.1 for gcc to link the launchers against, on a machine without the driver."""
    folder = tmp_path / "libcuda"
    folder.mkdir()
    (folder / "stub.c").write_text("int cuStub(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "stub.c")], check=True)
    monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(folder))
    return folder


def test_built_once_placed_where_triton_finds_it_and_not_built_again(tmp_path, monkeypatch, stub_libcuda):
    spec = Specialization("add", "k", "k.py", 1, [Argument("x", "*fp32"), Argument("n", "i32"),
                                                   Argument("BLOCK", "constexpr")])  # fmt: skip
    store, compiled = tmp_path / "store", tmp_path / "compiled"
    keys = launchers.build([spec, spec], store)
    utilities, _ = launchers.driver_utilities()
    harness = {launchers.source(list(kinds))[0] for kinds in launchers.HARNESS_KINDS}
    (key,) = keys - {utilities} - harness
    assert utilities in keys and harness <= keys, "Triton's CUDA utilities and the harness's are built beside them"
    library = store / key / ("__triton_launcher" + sysconfig.get_config_var("EXT_SUFFIX"))
    assert library.is_file() and library.stat().st_size > 1000
    built_at = library.stat().st_mtime_ns
    assert launchers.build([spec], store) == keys and library.stat().st_mtime_ns == built_at, "the store's is kept"
    assert launchers.place(keys | {"0" * 64, "../x"}, compiled, store) == 2 + len(harness)
    # Triton's own lookup in the grading's cache finds the copy, and builds nothing.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(compiled))
    monkeypatch.setattr(triton_build, "_build", lambda *a, **k: pytest.fail("Triton built the launcher again"))
    monkeypatch.setattr(triton_build, "_load_module_from_path", lambda name, path: path)
    _, text = launchers.source(launchers.kinds(spec))
    found = triton_build.compile_module_from_src(text, "__triton_launcher")
    assert found == str(compiled / launchers._base32(key) / library.name)
    _, text = launchers.driver_utilities()
    found = triton_build.compile_module_from_src(text, "cuda_utils")
    assert found == str(compiled / launchers._base32(utilities) / ("cuda_utils" + sysconfig.get_config_var("EXT_SUFFIX")))


def test_a_kept_folder_remembers_the_keys_and_nothing_else(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    assert launchers.remembered(kept) == set()
    keys = {"a" * 64, "b" * 64}
    launchers.remember(kept, keys)
    assert launchers.remembered(kept) == keys
    (kept / launchers.KEYS_FILE).write_text('["../../etc", {"a": 1}, "' + "c" * 64 + '"]')
    assert launchers.remembered(kept) == {"c" * 64}
    (kept / launchers.KEYS_FILE).write_text("not json")
    assert launchers.remembered(kept) == set()


def test_a_placed_library_replaces_the_file_and_leaves_a_loaded_one_whole(tmp_path):
    """The precompile pass places launchers while a timing child that started ahead may have loaded
    the same file (Triton's CUDA utilities, which every child loads as it starts CUDA): the new copy
    takes the name by a rename, so the pages the child mapped stay what they were. Written over in
    place, the child's mapping would change under it (this test's mapping shows the new bytes then)."""
    import mmap

    key = "ab" * 32
    store, compiled = tmp_path / "store", tmp_path / "compiled"
    library = store / key / launchers._file_name(launchers.UTILITIES)
    library.parent.mkdir(parents=True)
    library.write_bytes(b"A" * 4096)
    assert launchers.place({key}, compiled, store) == 1
    placed = compiled / launchers._base32(key) / library.name
    with open(placed, "rb") as loaded:
        mapped = mmap.mmap(loaded.fileno(), 0, prot=mmap.PROT_READ)
    library.write_bytes(b"B" * 4096)
    assert launchers.place({key}, compiled, store) == 1
    assert placed.read_bytes() == b"B" * 4096, "the second placing did not take the name"
    assert mapped[:4096] == b"A" * 4096, "the placed library was written over in place, under its loader"
    assert [p.name for p in placed.parent.iterdir()] == [library.name], "a partial copy was left behind"
