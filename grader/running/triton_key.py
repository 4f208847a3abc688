"""Triton's digest of its own installation, worked out once per machine and handed to each child.

Triton keys every kernel it compiles, and the autotuner's kept timings, by a digest of its own
files (`triton.runtime.cache.triton_key`: its compiler's, back ends' and language's modules and
its 400 MB library), hashed once in each process, at its first compile. Every child compiles:
on the CPU tier each launched kernel for the GPU (child/gpu_target.py), where the hash took
0.3 s of CPU on the 2-core machine, of a vector addition child's 2.3 s; on the GPU tier at its
start (child/main.py, `_key_triton`), 0.35 s on an H200. So the parent works it out once (kept.py:
in a file named by the size and modification time of each of those files, so that an upgrade
or an edit of Triton starts another) and passes it on each child's command line; the child
installs it before any student code runs. The digest only names entries of a submission's own
compile cache (compile_cache.py): a child that changes its own copy changes which of its own
entries it finds, nothing of another's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path

from grader.running.compile_cache import CACHE_ROOT
from grader.running.kept import kept

ROOT = CACHE_ROOT.parent / "triton-key"
# Triton's own form: its version, then hex digests joined by "-".
_FORM = re.compile(r"[0-9A-Za-z.+_-]{16,100000}")

_known: dict[Path, str] = {}  # this process's, by file


def triton_key() -> str:
    """What `triton.runtime.cache.triton_key()` gives in a process of this Python; "" where
    Triton is not installed."""
    path = _file()
    if path is None:
        return ""
    if path not in _known:
        _known[path] = kept(path, "triton", _read, _work_out, str)
    return _known[path]


def _file() -> Path | None:
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(spec.submodule_search_locations[0])
    digest = hashlib.sha256(str(root).encode())
    # What triton_key reads, and every other file beside it (their bytecode caches aside).
    files = [root / "runtime" / "cache.py"]
    for folder in ("compiler", "backends", "language", "_C"):
        for where, folders, names in os.walk(root / folder):
            folders[:] = sorted(f for f in folders if f != "__pycache__")
            files += [Path(where) / name for name in sorted(names) if not name.endswith(".pyc")]
    for path in files:
        try:
            found = path.stat()
        except OSError:
            continue
        digest.update(f"{path.relative_to(root)}|{found.st_size}|{found.st_mtime_ns}\n".encode())
    return ROOT / f"triton-{digest.hexdigest()[:32]}.txt"


def _read(path: Path) -> str | None:
    try:
        text = path.read_text()
    except (OSError, ValueError):
        return None
    return text if _FORM.fullmatch(text) else None


def _work_out() -> str:
    from triton.runtime.cache import triton_key

    return triton_key()
