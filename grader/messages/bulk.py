"""The file a timing child's kept outputs cross in (`Bulk`), beside its signed channel.

A timing child sends the outputs of its timed calls (one per benchmark, up to 2.5 GB for an
assignment) after its last timing, and no other timed phase starts until it has and is gone
(gpu_lock.Timed.share). Through the channel's pipe, hashed at both ends and written again by the
parent into a file of its own, they crossed at about 1.1 GB/s on an H200 machine: 6.5 s of a
warm grading of every assignment, in the queue of timed phases. Here the parent makes a memory
file (memfd) and hands it to the child, which writes each output's bytes into it while it hashes
them (frames.FrameWriter), and signs a frame on the channel that names only the length: each
payload follows the one before, so the child never names where its bytes lie.

What the parent reads it checks only once the child is gone (`digests`, from
child_run.Channel.check_kept): while the child lives, code in it could rewrite the file, as it
could rewrite the harness's buffer before it was hashed; once it has ended, nothing can. A file
that does not hash to what the frame signed is `tampering`. The file is bounded before any
student code runs: the parent sizes it to the outputs the benchmarks may send (their caps) and
seals it against growing or shrinking, so a child cannot fill the machine's memory with it,
where no memory cgroup would count what no process maps (sandbox.NO_CGROUP_SYSCALLS).
"""

from __future__ import annotations

import fcntl
import mmap
import os
from concurrent.futures import ThreadPoolExecutor

from _hashlib import openssl_sha256 as _sha256

UNIT = 1 << 22  # frames.PAYLOAD_CHUNK: a payload's unit of hashing
DIGEST_THREADS = 4


class Bulk:
    """The parent's memory file for one child's kept outputs."""

    def __init__(self):
        self.fd = os.memfd_create("kept-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)

    def bound(self, size: int) -> None:
        """Its size, fixed for good: the child can neither grow it nor shrink it, nor seal it."""
        os.ftruncate(self.fd, size)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)

    @property
    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def digests(self, offset: int, length: int) -> bytes:
        """The SHA-256 of each UNIT of `length` bytes from `offset`, in order, joined: hashed on
        several threads at once, read through a mapping (no copy)."""
        if not length:
            return b""
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        with mmap.mmap(self.fd, offset + length - start, prot=mmap.PROT_READ, offset=start) as mapped:
            view = memoryview(mapped)
            try:
                units = [view[at : min(at + UNIT, offset - start + length)]
                         for at in range(offset - start, offset - start + length, UNIT)]  # fmt: skip
                with ThreadPoolExecutor(DIGEST_THREADS, "kept-digest") as hashers:
                    found = b"".join(hashers.map(lambda unit: _sha256(unit).digest(), units))
                del units
            finally:
                view.release()
        return found

    def read_into(self, view: memoryview, offset: int) -> None:
        """`len(view)` bytes from `offset` into `view`."""
        done = 0
        while done < len(view):
            count = os.preadv(self.fd, [view[done:]], offset + done)
            if not count:
                raise ValueError(f"the kept outputs' file ended at {offset + done}")
            done += count

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()
