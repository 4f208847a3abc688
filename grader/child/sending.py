"""How an output tensor's bytes leave the child (`Outputs`): in its frame on the channel, or, on the
GPU tier, in the parent's memory file (messages/kept_file.py): a correctness case's outputs as they
come, a benchmark's kept output after the last benchmark.

A timing child keeps one timed output per benchmark on the GPU until every benchmark is timed:
moving them to the parent as they come (hundreds of MB each) would take a second or more of a
phase that holds the GPU alone. They leave after the last task's Done (`pay`), while the next timed
phase waits for this child to be gone.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch

from grader.messages import kept_file
from grader.messages.frames import SENT_CHUNK
from grader.messages.job import Job, Task
from grader.messages.reports import Output, Returned


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _raw(out: torch.Tensor) -> torch.Tensor:
    """A tensor's bytes, row-major, as a flat uint8 tensor on its device."""
    return out.detach().contiguous().reshape(-1).view(torch.uint8)


class Outputs:
    def __init__(self, send: Callable, job: Job, putter: kept_file.Putter | None = None):
        self.send = send
        self.owed: list[tuple[Task, str, torch.Tensor]] = []
        self.staging: torch.Tensor | None = None  # pinned host memory that outputs cross through (`pieces`)
        self.putter = putter  # the kept outputs' file, mapped at the child's start (main._kept_outputs_file)
        self.kept_seed, job.kept_seed = job.kept_seed, 0  # the kept outputs' fingerprints' (`pay`)

    def save(self, task: Task, name: str, out: object, later: bool = False) -> Returned:
        """Send a plain tensor's bytes to the parent (`later`: once every task is done, `pay`);
        anything else is described, never read."""
        if type(out) is not torch.Tensor:
            if isinstance(out, torch.Tensor):  # a subclass's methods would run student code as we read it
                return Returned("subclass", type(out).__qualname__)
            return Returned("other", type(out).__name__)
        if later:
            self.owed.append((task, name, out))
        elif self.putter is None or not self.put([(task, name, out)]):
            self.send_tensor(task, name, out)
        return Returned("tensor", "Tensor", name)

    def pay(self) -> None:
        """Send the outputs kept for later, after the last task's Done: the parent, which then has
        every timing, shares the GPU again meanwhile (gpu_lock.Timed.share). Those that fit go into
        the memory file the parent gave (`put`); the rest, through the channel."""
        if self.putter is not None and self.owed:
            del self.owed[: self.put(self.owed)]
        while self.owed:
            task, name, out = self.owed.pop(0)
            self.send_tensor(task, name, out)
            del out

    def put(self, outputs: list[tuple[Task, str, torch.Tensor]]) -> int:
        """The first of `outputs` that fit in the parent's memory file, put there, each
        fingerprinted on its device before its bytes leave it, and a frame for each that says where
        it lies; how many. A correctness case's outputs go there as they come, a timing child's
        kept outputs after its last benchmark. On an H200's host 2.7 GB crossed the channel's pipe
        in 1.5 s, hashed at both ends; into the file's mapping, registered with CUDA, the copy took
        0.05 s and their fingerprints 0.07-0.13 s (tools/kept_transport.py); the file's pages and the
        mapping were made before (spawned.bind_kept, Putter.ready). None where the fingerprint
        finds no GPU memory left under the child's cap: the channel carries them then."""
        putter = self.putter
        fitting = []
        for task, _, out in outputs:
            # On the GPU alone: the parent draws the fingerprint's weights on its GPU, where a CPU
            # generator's would differ (a student's output left on the CPU goes through the channel).
            if out.device.type != "cuda" or not out.numel() or out.numel() * out.element_size() > task.max_output_bytes:
                break
            fitting.append(_raw(out))
        fitting = fitting[: putter.room([flat.numel() for flat in fitting])]
        if not fitting:
            return 0
        try:
            prints = [kept_file.fingerprint(flat, self.kept_seed) for flat in fitting]
        except torch.OutOfMemoryError:
            return 0
        offsets = putter.put_all(fitting)
        for (task, name, out), offset, fingerprint in zip(outputs, offsets, prints):
            self.send(Output(task.id, name, dtype_name(out.dtype), list(out.shape), kept_at=offset,
                             fingerprint=fingerprint))  # fmt: skip
        return len(fitting)

    def send_tensor(self, task: Task, name: str, out: torch.Tensor) -> None:
        header = Output(task.id, name, dtype_name(out.dtype), list(out.shape))
        if out.numel() * out.element_size() > task.max_output_bytes:
            header.sent = False
            self.send(header)
        elif out.device.type == "cuda" and out.numel():
            flat = _raw(out)
            self.send(header, self.pieces(flat), flat.numel())
        else:
            host = out.detach().to("cpu", copy=True).contiguous()
            self.send(header, host.reshape(-1).view(torch.uint8).numpy() if host.numel() else b"")

    def pieces(self, flat: torch.Tensor) -> Iterator[memoryview]:
        """A GPU tensor's bytes, piece by piece, through one buffer of pinned host memory: 268 MB
        took 0.15 s to copy into pageable memory on an H200, and 0.005 s through 16 MB of pinned
        memory; a timed phase's next one waits for this child's outputs to cross (gpu_lock.py)."""
        if self.staging is None:
            self.staging = torch.empty(SENT_CHUNK, dtype=torch.uint8, pin_memory=True)
        for start in range(0, flat.numel(), SENT_CHUNK):
            piece = flat[start : start + SENT_CHUNK]
            staged = self.staging[: piece.numel()]
            staged.copy_(piece)  # waits for the copy: the bytes are on the host when they are sent
            yield memoryview(staged.numpy()).cast("B")
