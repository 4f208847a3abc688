"""The memory file a timing child's kept outputs cross in (`KeptFile`, the parent's; `Putter`, the child's).

A timing child keeps one output of its timed calls per benchmark on the GPU (up to 2.5 GB for an
assignment) and sends them after its last timing; no other timed phase starts until it has, and
is gone (gpu_lock.Timed.share). Through the channel's pipe, hashed at both ends, they crossed at
about 1.5 GB/s on an H200's host, the child's writes into the pipe most of it: 5.5 s of a warm
grading of every assignment, between timed phases. Here the parent makes a memory file (memfd),
sized to what right outputs take before the child has its job, sealed against growing, its pages
made by the parent ahead; the child maps it at its start, registered with CUDA, while the GPU is
shared, and after its last benchmark copies each kept output from the GPU straight into it, then
signs a frame on the pipe that says where it lies and its fingerprint. An output that finds no
room (larger than the right one) goes through the pipe.

Its fingerprint, and not a hash of the file's bytes, is what makes a rewrite show. The harness
takes it on the GPU from its own copy of the output (worker.Worker.run_bench), before any byte
leaves the GPU: a weighted sum, modulo 2**64, of the output's 32-bit words, with weights drawn
from a seed of the parent's (in the Job, as the key is); the parent takes it again from what it
reads, on its own GPU, when it judges the output. A rewrite of the file by code in the child,
before the harness's copy or after it, or by anything that kept a hold of the file once the child
was gone, changes the sum except by chance (at most 2**-31 for a change the writer did not see the
weights of) and is `tampering`. The pipe's hashes bound nothing of this kind: code in the child
could rewrite the harness's pinned buffer between its copy and its hashing.

The file is bounded before any student code runs: the parent sizes it to what the benchmarks may
send when right and seals it against growing or shrinking, so a child cannot fill the machine's
memory with it; the parent makes its pages, and they are the parent's until its grading ends.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import threading
import time
from pathlib import Path

FINGERPRINT_WORDS = 1 << 24  # the words summed at once (three int64 temporaries of 128 MiB)
FINGERPRINT_MASK = (1 << 62) - 1
PIECE = 1 << 26  # bytes copied at once through the child's pinned memory, where the file could not be pinned


def _torch():
    import torch  # the grading's processes have it; a module that only sizes the file does not need it

    return torch


_open: dict[str, list[KeptFile]] = {}  # this process's files, by the grading folder they belong to


class Rewritten(Exception):
    """A kept output whose bytes do not give the fingerprint the harness took of them."""


class KeptFile:
    """The parent's memory file for one timing child's kept outputs; `close_under` closes it with
    its grading's folder (it holds what the child sent, gigabytes, until then)."""

    def __init__(self, folder: Path | str = ""):
        self.fd = os.memfd_create("kept-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self._mapped: mmap.mmap | None = None
        self.folder = str(folder)
        self.seed = 0
        _open.setdefault(self.folder, []).append(self)

    def bound(self, size: int, ahead: int = 0) -> None:
        """Its size, fixed for good: the child can neither grow it nor shrink it, nor seal it. The
        first `ahead` bytes' pages are made now, on a thread of this process (2.7 GB in 0.25-0.35 s
        on an H200's host), and not by the child."""
        os.ftruncate(self.fd, size)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        if ahead:
            threading.Thread(target=_make_pages, args=(os.dup(self.fd), min(ahead, size)), daemon=True).start()

    @property
    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def bytes_at(self, offset: int, length: int):
        """`length` bytes from `offset` as a uint8 tensor over the file itself (no copy): a private
        mapping, so nothing the parent does to the tensor reaches the file."""
        torch = _torch()
        if self._mapped is None:
            self._mapped = mmap.mmap(self.fd, self.size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        return torch.frombuffer(self._mapped, dtype=torch.uint8, count=length, offset=offset)

    def load(self, offset: int, length: int, expected: int, device: str):
        """The bytes onto `device`, checked against the harness's fingerprint of them: Rewritten
        where they differ (code in the child, or something that kept hold of the file, wrote them)."""
        loaded = self.bytes_at(offset, length).to(device)
        if fingerprint(loaded, self.seed) != expected:
            raise Rewritten(f"the {length} bytes of a kept output changed after the grader's harness took their "
                            "fingerprint on the GPU: something rewrote the file they crossed in")  # fmt: skip
        return loaded

    def close(self) -> None:
        self._mapped = None  # unmapped once the last tensor over it is gone
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        held = _open.get(self.folder, []) if _open else []  # (None as the interpreter ends)
        if self in held:
            held.remove(self)
            if not held:
                del _open[self.folder]

    def __del__(self):
        self.close()


def close_under(folder: Path | str) -> None:
    """Close the files of a grading's folder: it ends."""
    for file in list(_open.get(str(folder), [])):
        file.close()


def _make_pages(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        pass  # the child's mapping makes them (Putter.ready)
    finally:
        os.close(fd)


def fingerprint(flat, seed: int) -> int:
    """A uint8 tensor's fingerprint: the sum of its 32-bit words (its bytes where their count is
    not a multiple of four), each times a weight drawn from `seed` by torch's generator on the
    tensor's device, modulo 2**64. Integer sums wrap, so the order of the GPU's additions changes
    nothing, and the parent's GPU draws the child's weights from the same seed. Its low 62 bits
    (what a message's integer may hold: decoding.py)."""
    torch = _torch()
    words = flat.view(torch.int32) if flat.numel() % 4 == 0 else flat
    generator = torch.Generator(device=flat.device)
    total = torch.zeros((), dtype=torch.int64, device=flat.device)
    for index, start in enumerate(range(0, words.numel(), FINGERPRINT_WORDS)):
        part = words[start : start + FINGERPRINT_WORDS].to(torch.int64)
        generator.manual_seed((seed + index) % (1 << 63))
        weights = torch.empty_like(part).random_(generator=generator)
        total += part.mul_(weights).sum()
        del part, weights
    return int(total.item()) & FINGERPRINT_MASK


class Putter:
    """The child's end: copies GPU tensors' bytes one after another into the parent's file, through
    a mapping of the whole file made at the child's start (`ready`), while the GPU is shared: on an
    H200's host, making the page table of 2.7 GB of the file's pages took 1.0 s and registering it
    with CUDA 0.1 s, where the copy took 0.05 s, and a timed phase waits for this child's end.
    The page table is made on a thread of its own (`map_ahead`), begun before the child starts
    CUDA: that shared hold, which a timed phase that waits also waits for, then has only the
    registration left of it (a thread, since libc's mmap releases the GIL where Python's does not)."""

    def __init__(self, fd: int, staged: bool = False):
        self.fd, self.at = fd, 0
        self.size = os.fstat(fd).st_size
        self.staged = staged  # through pinned memory of its own even where CUDA would pin the file
        self.registered = False  # the mapping pinned for the copy engine (CUDA's host registration)
        self.dest = None  # the mapping, as a uint8 tensor (`ready`)
        self.timings: dict[str, float] = {}  # seconds: the mapping, its registration, the copies
        self.mapping: threading.Thread | None = None  # `map_ahead`'s
        self.mapped: tuple[int, int] | None = None  # (the mapping's address, errno): 0 where it failed

    def map_ahead(self) -> None:
        """Begin the mapping on a thread: `ready` takes it up."""
        if self.mapping is None and self.size:
            self.mapping = threading.Thread(target=self._map, name="kept outputs' mapping", daemon=True)
            self.mapping.start()

    def ready(self) -> None:
        """Map the whole file, its pages' entries made in one call, not a fault each, and register
        the mapping with CUDA where it lets it (a GPU's child, with its CUDA context)."""
        torch = _torch()
        if self.dest is not None or not self.size:
            return
        self.map_ahead()
        self.mapping.join()
        address, error = self.mapped
        if not address:
            raise OSError(error, f"the kept outputs' file could not be mapped: {os.strerror(error)}")
        self.dest = torch.frombuffer((ctypes.c_uint8 * self.size).from_address(address), dtype=torch.uint8)
        began = time.perf_counter()
        self.registered = not self.staged and torch.cuda.is_available() and _register(self.dest)
        self.timings["register"] = time.perf_counter() - began

    def _map(self) -> None:
        began = time.perf_counter()
        self.mapped = (0, errno.ENOSYS)  # until libc says otherwise
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long)  # fmt: skip
        except (AttributeError, OSError):
            return
        address = libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | mmap.MAP_POPULATE,
                            self.fd, 0)  # fmt: skip
        failed = address is None or address == ctypes.c_void_p(-1).value
        self.mapped = (0, ctypes.get_errno()) if failed else (address, 0)
        self.timings["map"] = time.perf_counter() - began

    def room(self, sizes: list[int]) -> int:
        """How many of these outputs, in order, fit in what is left of the file."""
        count, total = 0, self.at
        while count < len(sizes) and total + sizes[count] <= self.size:
            total += sizes[count]
            count += 1
        return count

    def put_all(self, flats: list) -> list[int]:
        """Copy uint8 tensors into the file one after another (`room` says they fit): where each
        lies. From the GPU, straight into the file where its mapping is registered with CUDA; else
        each piece through pinned memory of the child's own."""
        torch = _torch()
        self.ready()
        began = time.perf_counter()
        on_gpu = any(flat.is_cuda for flat in flats)
        staging = None
        if on_gpu and not self.registered and flats:
            staging = torch.empty(min(PIECE, max(flat.numel() for flat in flats)), dtype=torch.uint8, pin_memory=True)
        offsets = []
        for flat in flats:
            offsets.append(self.at)
            target = self.dest[self.at : self.at + flat.numel()]
            if staging is None:
                target.copy_(flat)  # the copy engine writes the file's pages itself
            else:
                for at in range(0, flat.numel(), PIECE):
                    piece = flat[at : at + PIECE]
                    staging[: piece.numel()].copy_(piece)
                    target[at : at + piece.numel()].copy_(staging[: piece.numel()])
            self.at += flat.numel()
        if on_gpu:
            torch.cuda.synchronize()
        self.timings["copy"] = time.perf_counter() - began
        return offsets


def _register(dest) -> bool:
    torch = _torch()
    try:
        return int(torch.cuda.cudart().cudaHostRegister(dest.data_ptr(), dest.numel(), 0)) == 0
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False
