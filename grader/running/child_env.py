"""What of the grader's own environment a child inherits: an allow-list, not a deny-list.

The teaching assistant's shell holds whatever the TA keeps there (cloud keys, tokens, a proxy's
password), and student code that can read its environment can print it into its own feedback.
So a child starts from nothing but the variables below, each needed by Python, the compilers or
CUDA to find their files and to run as configured, and none a secret; the grader then sets what
it owns itself (HOME, TMPDIR, the compilers' cache folders, TRITON_INTERPRET, ...:
isolation.child_environment), whatever the TA's values.

Left out on purpose: everything else, including LD_PRELOAD and PYTHON* (code the TA's shell
would load), CUDA_LAUNCH_BLOCKING and TORCH_*/PYTORCH_* (they change what a timing measures),
CUDA_CACHE_PATH and XDG_* (folders outside the grading a child could write to for a later one),
TRITON_* beyond the paths of its tools (the grader decides how Triton caches and runs), and
GRADER_* (the grader's own settings).
"""

from __future__ import annotations

from collections.abc import Mapping

ALLOWED = frozenset({
    "PATH",  # where gcc, nvcc, ptxas and ldconfig are found
    "LANG", "LANGUAGE", "TZ",  # how text and times are read and written
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",  # where libcuda and headers are, on GPU images
    "CC", "CXX",  # the C compiler Triton builds its launchers with
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",  # which GPU, and where CUDA lives
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",  # a GPU container's own settings
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",  # the child's share of the cores
    "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH",
    "TRITON_LIBDEVICE_PATH",  # where an image keeps Triton's tools
})  # fmt: skip
ALLOWED_PREFIXES = ("LC_",)  # the locale's categories


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a child may start with."""
    return {name: value for name, value in environ.items() if name in ALLOWED or name.startswith(ALLOWED_PREFIXES)}
