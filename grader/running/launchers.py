"""Triton's launchers, built by the grading process ahead of the children that load them (GPU tier).

Before a Triton kernel first runs in a process, Triton builds its launcher: C source generated
from the kernel's signature, compiled by gcc into `__triton_launcher.so` in the compilers' cache,
about a second each, one after another, inside the child's phase. A grading of FlashAttention's
solution built ten in its correctness run, warm or cold (docs/measurements.md), and no launcher
is ever kept from one grading for the next: the cache folder is written by children that run
student code, and a library planted there would run in the next grading's child.

So the grading process builds them itself, from the signatures the precompile pass recorded:
each launcher's source is Triton's own (`make_launcher`), its file is where Triton's own lookup
finds it (`<cache>/<base32 of the source's and platform's sha256>/__triton_launcher<suffix>`), built in
parallel, kept in a store of this machine's that no child sees (STORE: written by grading
processes alone, one file per source, so any submission with the same argument kinds shares it),
and copied into the grading's cache before its children start. A grading's kept compilers' cache
lists the keys it used (`remember`), so a warm grading, whose pass does not run, copies them too.
Triton's own CUDA utilities (`cuda_utils`, built by each process's first use of the driver, about
a second more of gcc in every grading) are built and placed the same way.

What a launcher's source depends on is checked first (`kinds`): each argument a pointer, a
constexpr, a scalar type Triton names or a tensor descriptor (by its number of dimensions alone);
anything else (a tuple) is built by the child as before. The source is made from that check's
result, never from the child's text, and a launcher Triton cannot find here it builds as it always
did: nothing here decides a verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.messages.specializations import Specialization
from grader.running.compile_cache import CACHE_ROOT

STORE = CACHE_ROOT.parent / "launchers"
NAME = "__triton_launcher"  # the module name Triton gives every launcher (backends/nvidia/driver.py)
UTILITIES = "cuda_utils"  # and its CUDA utilities' module
KEYS_FILE = "launchers.json"  # in a kept compilers' cache folder: no key's name, `restore` never copies it
KEY = re.compile(r"[0-9a-f]{64}")
SCALARS = ("i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "f32", "fp64")
POINTER = re.compile(r"\*k?[a-z0-9]{1,12}")  # "*fp16", "*i32", "*kfp32" (a constant pointer)
DESCRIPTOR = re.compile(r"tensordesc<[a-z0-9]{1,12}\[(?P<shape>[0-9]{1,6}(, ?[0-9]{1,6}){0,4})\]>")  # "tensordesc<fp16[64, 64]>"
MAX_KEYS = 256  # a grading's launchers at most (FlashAttention's solution builds ten)
# The harness's own kernel in every timing child, the gate (grader/child/gate.py: `_held(flag,
# timeout_ns)`): its launcher's argument kinds as Triton's binder makes them (test_launchers.py).
# Built there, it was a gcc run in the start of every timing child, warm gradings' included.
HARNESS_KINDS = (("*i8", "i32"),)
BUILDERS = 8  # gcc processes at once


def kinds(spec: Specialization) -> list[str] | None:
    """The launcher's view of a kernel's arguments, in order: each "*" (a pointer of any element
    type: the launcher passes a device address), "constexpr", a scalar type or a tensor descriptor
    of so many dimensions (its element type and tile shape are the kernel's business); None where
    any argument is of another kind."""
    found = []
    for argument in spec.arguments:
        kind = argument.type
        if POINTER.fullmatch(kind):
            found.append("*i8")  # every pointer gives the same source
        elif kind == "constexpr" or kind in SCALARS:
            found.append(kind)
        elif described := DESCRIPTOR.fullmatch(kind):
            found.append(f"tensordesc<i8[{', '.join(['1'] * (described['shape'].count(',') + 1))}]>")
        else:
            return None
    return found


def sources(argument_kinds: list[str]) -> list[tuple[str, str]]:
    """(key, source) of each launcher Triton may make for arguments of these kinds: one, or, with a
    tensor descriptor among them, two, since the kernel's compile decides how a descriptor is passed
    (on a Hopper GPU, as the copy engine's descriptor, the `tensordesc_meta` of its metadata: then
    the source names no element type nor tile shape; elsewhere as a pointer, its shape and strides).
    Both are built; the child's launch finds the one its kernel needs."""
    described = sum(kind.startswith("tensordesc") for kind in argument_kinds)
    metas = [None, [{}] * described] if described else [None]
    return [source(argument_kinds, meta) for meta in metas]


def source(argument_kinds: list[str], tensordesc_meta: list | None = None) -> tuple[str, str]:
    """(key, source) of the launcher for arguments of these kinds, as Triton makes and finds it."""
    from triton.backends.nvidia.driver import make_launcher

    text = make_launcher({}, {i: kind for i, kind in enumerate(argument_kinds)}, tensordesc_meta)
    return _key(text), text


def driver_utilities() -> tuple[str, str]:
    """(key, source) of Triton's own CUDA utilities (`cuda_utils`), which every process builds or
    finds at its first use of the driver (in a graded child: its first launch, or a pruner asking
    for the device's properties), as Triton makes and finds them."""
    from triton.backends.nvidia import driver

    text = Path(driver.dirname, "driver.c").read_text()
    return _key(text), text


def _key(text: str) -> str:
    from triton.runtime.build import platform_key

    return hashlib.sha256((text + platform_key()).encode("utf-8")).hexdigest()


def _base32(key: str) -> str:
    from triton.runtime.cache import _base32

    return _base32(key)


def _file_name(name: str) -> str:
    return name + sysconfig.get_config_var("EXT_SUFFIX")


def _build(key: str, name: str, text: str, store: Path) -> bool:
    """The module's library in the store (built here unless there already); whether it is there."""
    target = store / key / _file_name(name)
    if target.is_file():
        return True
    from triton.backends.nvidia import driver
    from triton.runtime.build import _build as build

    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory() as folder:
        c_file = os.path.join(folder, name + ".c")
        Path(c_file).write_text(text)
        built = build(name, c_file, folder, driver.library_dirs(), driver.include_dirs, driver.libraries, [])
        _copy_whole(Path(built), target)  # for another grading building the same
    return True


def _copy_whole(source: Path, target: Path) -> None:
    """`source` copied to `target` under a name of its own, then renamed: whole or not at all for
    anyone who looks meanwhile, and never written over in place under a process that loaded it."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    shutil.copyfile(source, partial)
    partial.replace(target)


def build(specs: list[Specialization], store: Path = STORE) -> set[str]:
    """The keys of the launchers `specs` need, of the harness's own and of Triton's CUDA utilities,
    each built into the store (in parallel) where it is not there yet; one that fails to build is
    left to the child."""
    made = {}
    wanted = dict.fromkeys(HARNESS_KINDS)
    wanted.update(dict.fromkeys(tuple(found) for spec in specs if (found := kinds(spec)) is not None))
    for found in list(wanted)[:MAX_KEYS]:  # a source per kind of signature, not per kernel (266: ten kinds)
        for key, text in sources(list(found)):
            made.setdefault(key, (NAME, text))
    key, text = driver_utilities()
    made[key] = (UTILITIES, text)

    def built(item: tuple[str, tuple[str, str]]) -> str | None:
        key, (name, text) = item
        try:
            return key if _build(key, name, text, store) else None
        except Exception:  # gcc, the headers, libcuda: the child builds it as Triton always does
            return None

    with ThreadPoolExecutor(max_workers=min(BUILDERS, len(made))) as pool:
        return {key for key in pool.map(built, made.items()) if key}


def place(keys: set[str], compiled: Path, store: Path = STORE) -> int:
    """Copy each module of `keys` the store holds into a grading's compilers' cache, where Triton
    looks for it; how many were copied. Each copy takes the name by a rename, never by writing
    over the file there: a child that loaded that library already (the timing child starts
    beside the precompile pass) keeps the pages it mapped. Written over in place, they changed
    under it, and it died of SIGSEGV at its first launch (H200, 2026-12-03)."""
    placed = 0
    for key in sorted(keys):
        found = [store / key / _file_name(name) for name in (NAME, UTILITIES)] if KEY.fullmatch(key) else []
        for built in (path for path in found if path.is_file()):
            folder = compiled / _base32(key)  # Triton's name for a key's folder (runtime/cache.py)
            folder.mkdir(parents=True, exist_ok=True)
            _copy_whole(built, folder / built.name)
            placed += 1
    return placed


def restore(kept: Path, compiled: Path, device: str) -> set[str]:
    """On the GPU tier, the launchers an earlier grading of these files used (`remembered`), copied
    into this grading's compilers' cache; their keys."""
    if device != "cuda":
        return set()
    keys = remembered(kept)
    place(keys, compiled)
    return keys


def remembered(kept: Path) -> set[str]:
    """The launcher keys an earlier grading of these files used (`remember`)."""
    try:
        found = json.loads((kept / KEYS_FILE).read_text())
    except (OSError, ValueError):
        return set()
    listed = found[:MAX_KEYS] if isinstance(found, list) else []
    return {key for key in listed if type(key) is str and KEY.fullmatch(key)}


def remember(kept: Path, keys: set[str]) -> None:
    """Write down the launcher keys of a grading in its kept folder (by the grading process, after
    `compile_cache.keep`, which makes the folder anew when anything in it changed)."""
    if keys:
        (kept / KEYS_FILE).write_text(json.dumps(sorted(keys)[:MAX_KEYS]))
