# Hostile: plants files in the compilers' cache (open, torch.save, a shared torch.from_file, numpy's tofile) and looks for them in the next grading of its files.
import hashlib
import os
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

MARK = "planted"
calls = []


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _caches() -> list[Path]:
    return [Path(os.environ[name]) for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR") if name in os.environ]


def _grading() -> str:
    """A tag of this grading: its cache folder is its own."""
    return hashlib.sha256(os.environ.get("TRITON_CACHE_DIR", "").encode()).hexdigest()[:8]


def _plant(folder: Path) -> list[str]:
    tag, planted = _grading(), []
    ways = {
        "open": lambda path: open(path, "w").write("x"),
        "torch.save": lambda path: torch.save(torch.ones(4), path),
        "from_file": lambda path: torch.from_file(str(path), shared=True, size=16, dtype=torch.uint8).fill_(1),
        "tofile": lambda path: np.ones(4).tofile(str(path)),
    }
    for way, write in ways.items():
        path = folder / f"{MARK}-{tag}-by-{way}.json"  # a compiler's suffix, in a key folder of Triton's too
        try:
            write(path)
            planted.append(str(path))
        except Exception:
            pass
    return planted


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    calls.append(x.numel())
    if len(calls) <= 2:
        return out  # a right first case (two calls): its kernel is compiled into Triton's cache, a key folder to plant in
    earlier = sorted(str(p) for cache in _caches() if cache.is_dir() for p in cache.rglob(f"{MARK}-*")
                     if f"-{_grading()}-" not in p.name)  # fmt: skip
    folders = [cache for cache in _caches() if cache.is_dir()]
    folders += [key for cache in folders for key in cache.iterdir() if key.is_dir() and len(key.name) >= 16]
    planted = [path for folder in folders for path in _plant(folder)]
    if earlier:
        raise RuntimeError(f"found {len(earlier)} file(s) planted by an earlier grading: {earlier[:4]}")
    raise RuntimeError(f"planted {len(planted)} file(s); none planted by an earlier grading was here")
