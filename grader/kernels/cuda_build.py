"""Building a student's CUDA C file into a shared library with nvcc, cached by content.

The parent builds (compiling runs no student code); the child loads the library with ctypes
and calls its extern "C" launchers with the device pointers of torch tensors. A compile error
is reported with file, line and the compiler's own words. Libraries are cached by a hash of the
sources, the flags and the compiler, so regrading an unchanged submission costs no build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.kernels import cuda_resources

BUILD_TIMEOUT_S = 120
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernel-grader" / "cuda"
HEADERS = ("*.cu", "*.cuh", "*.h", "*.hpp")
_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s:(]+)\((?P<line>\d+)\): (?P<kind>error|warning)[^:]*: (?P<text>.*)$")


@dataclass
class Build:
    library: Path | None  # None when it failed
    reason: str = "ok"  # ok, missing_file, compile_error
    message: str = ""
    seconds: float = 0.0  # nvcc's time; 0 for a library found in the cache
    kernels: tuple[str, ...] = ()  # the __global__ functions it holds, demangled, without parameters
    resources: cuda_resources.CudaKernels | None = None  # what each kernel asks of an SM (advice)


def nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    return str(home) if home.exists() else None


def architecture() -> str:
    """The GPU's own architecture where there is one (sm_90a on Hopper), else a compile-check target."""
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}" + ("a" if major == 9 else "")
    return "sm_90"


def _key(source: Path, flags: list[str], compiler: str) -> str:
    digest = hashlib.sha256(" ".join(flags).encode())
    digest.update(subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout.encode())
    for pattern in HEADERS:
        for path in sorted(source.parent.glob(pattern)):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def compile_errors(output: str, source: Path) -> str:
    """The compiler's errors, each as 'file, line N: message', then the raw log's first lines."""
    errors = []
    for line in output.splitlines():
        match = _DIAGNOSTIC.match(line.strip())
        if match and match["kind"] == "error":
            errors.append(f"{Path(match['file']).name}, line {match['line']}: {match['text']}")
    raw = "\n".join(output.strip().replace(str(source.parent) + "/", "").splitlines()[:30])
    head = "\n".join(errors[:10]) if errors else f"nvcc failed to build {source.name}"
    return f"{head}\n\nnvcc said:\n{raw}"


def build(source: Path) -> Build:
    """Compile `source` into a shared library (or find it in the cache)."""
    source = source.resolve()  # nvcc runs in the source's folder: a relative path would not be found there
    if not source.is_file():
        return Build(None, "missing_file", f"{source.parent.name}/{source.name} was not found in the submission.")
    compiler = nvcc()
    if compiler is None:
        return Build(None, "no_gpu", "nvcc is not installed here, so the CUDA file was not even compile-checked")
    flags = ["-O3", "-shared", "-Xcompiler", "-fPIC", f"-arch={architecture()}", "-lineinfo"]
    library = CACHE / f"{source.stem}-{_key(source, flags, compiler)}.so"
    if library.exists():
        return Build(library, kernels=kernels_in(library, compiler), resources=cuda_resources.read(library, source, compiler))
    library.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / library.name
        command = [compiler, *flags, "-I", str(source.parent), "-o", str(target), str(source)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=source.parent)
        except subprocess.TimeoutExpired:
            return Build(None, "compile_error", f"nvcc took longer than {BUILD_TIMEOUT_S} s to build {source.name}")
        if done.returncode != 0:
            return Build(None, "compile_error", compile_errors(done.stdout + done.stderr, source))
        os.replace(target, library)  # atomic: a concurrent grader never sees half a library
    return Build(library, seconds=time.monotonic() - started, kernels=kernels_in(library, compiler),
                 resources=cuda_resources.read(library, source, compiler))


def kernels_in(library: Path, compiler: str) -> tuple[str, ...]:
    """The kernels compiled into the library, read from its device code (cuobjdump, beside nvcc),
    as the profiler names them: on the GPU a kernel that is not among them is not the student's."""
    tools = Path(compiler).parent
    cuobjdump, demangler = tools / "cuobjdump", shutil.which("cu++filt", path=str(tools)) or shutil.which("c++filt")
    try:
        listing = subprocess.run([str(cuobjdump), "-elf", str(library)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    mangled = sorted({m for m in re.findall(r"\.text\.(\S+)", listing.stdout)})
    if not mangled or demangler is None:
        return tuple(mangled)
    demangled = subprocess.run([demangler], input="\n".join(mangled), capture_output=True, text=True).stdout.split("\n")
    from grader.judging.integrity import kernel_base

    return tuple(sorted({kernel_base(name) for name in demangled if name.strip()}))


def private_copies(builds: dict[str, Build], folder: Path) -> dict[str, str]:
    """Each CUDA part's library copied into a grading's own `folder`, by part: the build cache,
    which holds every other student's libraries too, stays out of the child's sight."""
    copies = {}
    for name, build in builds.items():
        if build.library:
            copy = folder / name / build.library.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(build.library, copy)
            copies[name] = str(copy)
    return copies
