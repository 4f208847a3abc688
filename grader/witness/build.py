"""Building the witness library (witness.c) once per machine, against the CUPTI that torch loads.

The library must use the very CUPTI library the child's torch loads (one CUPTI per process: a
second copy would fight the first over the driver's callbacks), so it is linked to that file by
path. torch's CUDA wheels carry it (`nvidia/cu13/lib/libcupti.so.13` for torch 2.11+cu130, with
its headers beside it); a CUDA toolkit's copy is the fallback. The build takes gcc about a second;
its result is kept under the grader's cache folder, keyed by the source and the library it links,
so every child of every grading on the machine loads the same file.

Which host calls the witness keeps a line for (launches, copies, memsets) is read here from
CUPTI's own headers, by name, and handed to the child in its environment: the callback ids
differ between CUDA versions, the names do not.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("witness.c")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").absolute() / "kernel-grader" / "witness"
TOOLKITS = ("/usr/local/cuda", "/usr/local/cuda-13.0", "/usr/local/cuda-12.8", os.environ.get("CUDA_HOME", ""))
API_CALLS = re.compile(r"Launch|Memcpy|Memset")  # the host calls worth a line: they start GPU work
CBID = re.compile(r"CBID_(\w+)\s*=\s*(\d+)")


def enabled() -> bool:
    """Whether gradings load the witness: on the GPU tier unless GRADER_WITNESS=0 in the grader's
    environment. Its records are the evidence for every timing-related tampering verdict, and it
    lets a timed stretch wait behind a gate without a side stream going unseen (child/gate.py)."""
    return os.environ.get("GRADER_WITNESS", "1") != "0"


@dataclass(frozen=True)
class Library:
    """A built witness, ready for a child: where it is, and which API calls it keeps."""

    path: Path
    callbacks: str  # "R:...;D:..." for GRADER_WITNESS_CBIDS


@dataclass(frozen=True)
class Missing:
    """Why no witness is built here, in words for the report's environment."""

    why: str


def _torch_cupti() -> tuple[Path, Path] | None:
    """torch's own CUPTI (the library file and its headers' folder), as its CUDA wheels lay it out."""
    for root in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for library in sorted(Path(root).glob("nvidia/*/lib/libcupti.so*")):
            headers = library.parent.parent / "include"
            if (headers / "cupti.h").exists():
                return library, headers
    return None


def _toolkit_cupti() -> tuple[Path, Path] | None:
    for base in filter(None, TOOLKITS):
        for lib, include in (("targets/x86_64-linux/lib", "targets/x86_64-linux/include"),
                             ("extras/CUPTI/lib64", "extras/CUPTI/include"), ("lib64", "include"), ("lib", "include")):  # fmt: skip
            found = sorted(Path(base, lib).glob("libcupti.so*"))
            if found and (Path(base, include) / "cupti.h").exists():
                return found[0], Path(base, include)
    return None


def callbacks(headers: Path) -> str:
    """The callback ids of the runtime's and the driver's calls that start GPU work."""
    kept = []
    for domain, name in (("R", "cupti_runtime_cbid.h"), ("D", "cupti_driver_cbid.h")):
        text = (headers / name).read_text(errors="replace") if (headers / name).exists() else ""
        ids = sorted({int(m.group(2)) for m in CBID.finditer(text) if API_CALLS.search(m.group(1))})
        kept.append(f"{domain}:{','.join(map(str, ids))}")
    return ";".join(kept)


def _cuda_headers(cupti_headers: Path) -> list[Path]:
    """cupti.h includes cuda.h: beside it in torch's wheel layout, or in a toolkit."""
    found = [cupti_headers]
    for base in filter(None, TOOLKITS):
        for include in ("targets/x86_64-linux/include", "include"):
            if (Path(base, include) / "cuda.h").exists():
                return found + [Path(base, include)]
    return found


@functools.cache
def library() -> Library | Missing:
    """The witness for this machine, built once (a lock keeps two workers from building it twice)."""
    found = _torch_cupti() or _toolkit_cupti()
    if found is None:
        return Missing("no CUPTI library found (torch's CUDA wheels or a CUDA toolkit carry it)")
    cupti, headers = found
    compiler = shutil.which(os.environ.get("CC", "") or "gcc") or shutil.which("cc")
    if compiler is None:
        return Missing("no C compiler to build it with")
    digest = hashlib.sha256(SOURCE.read_bytes() + str(cupti.resolve()).encode()).hexdigest()[:16]
    folder = CACHE / digest
    built = folder / "libwitness.so"
    kept = callbacks(headers)
    if built.exists():
        return Library(built, kept)
    folder.mkdir(parents=True, exist_ok=True, mode=0o755)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built.exists():
            return Library(built, kept)
        partial = folder / f"libwitness.so.{os.getpid()}"
        includes = [f"-I{p}" for p in _cuda_headers(headers)]
        command = [compiler, "-O2", "-shared", "-fPIC", "-o", str(partial), str(SOURCE), *includes, str(cupti),
                   f"-Wl,-rpath,{cupti.parent}", "-lstdc++", "-lpthread", "-ldl"]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            return Missing(f"its build failed: {(done.stderr or done.stdout).strip()[-300:]}")
        partial.replace(built)
    return Library(built, kept)
