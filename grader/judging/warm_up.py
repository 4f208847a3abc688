"""The judging process's own start on the GPU, made while a correctness child runs its cases.

Judging a student's cases here (verdicts.py) was also where this process first used the GPU: its
first copy of an input made its CUDA context, its first float64 product its cuBLAS handle, and
the first gradient a reference asked for (`torch.autograd.grad` with the output's gradient given)
imported torch's symbolic shapes, and sympy with them: 1.1 s on the 2-core machine, most of
FlashAttention's judging of its cases on an H200 (py-spy, every assignment side by side). That
judging holds the GPU shared, and a timed phase that waits begins only once no shared hold is
left: the warm grading's first timed phase waited for it.

So a thread makes them while the child runs the cases, when this process only waits for it, and
inside the correctness phase's own hold: CUDA starts here, as in a child, only while this grading
holds the GPU (holds.phase_hold), never during another student's timed phase. The judging waits
for the thread (`ready`). Nothing the verdicts depend on is made here: a context, a handle, an
imported module, and their first calls on numbers of the thread's own.
"""

from __future__ import annotations

import inspect
import threading
from types import ModuleType
from typing import Callable

import torch

GRADIENT_NAMES = frozenset({"autograd", "backward"})  # what a reference that takes a gradient calls


class WarmUp:
    def __init__(self, device: str, reference: ModuleType | None):
        self.device = device
        self.gradients = reference is not None and takes_gradients(reference)
        self.thread: threading.Thread | None = None
        self.failed: BaseException | None = None  # kept for the tests: judging makes the same itself

    def start(self) -> None:
        if self.device != "cuda" or self.thread is not None:
            return
        self.thread = threading.Thread(target=self._run, name="judging warm-up", daemon=True)
        self.thread.start()

    def after_hold(self, gate: Callable[[str], None] | None) -> Callable[[str], None] | None:
        """The correctness phase's gate that starts the warm-up once the phase holds the GPU (its
        stage "run"); where no gate is (the GPU not shared), it starts now."""
        if gate is None:
            self.start()
            return None

        def opened(stage: str) -> None:
            gate(stage)
            if stage == "run":
                self.start()

        return opened

    def ready(self) -> None:
        """Wait for the warm-up, where one started: inside the hold it began in."""
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        try:
            square = torch.ones(8, 8, dtype=torch.float64, device=self.device)  # the context
            (square @ square).sum().item()  # cuBLAS's handle
            if self.gradients:
                leaf = torch.ones(8, dtype=torch.float64, device=self.device, requires_grad=True)
                torch.autograd.grad(leaf * 2, leaf, torch.ones_like(leaf))  # symbolic shapes, sympy
        except BaseException as error:  # noqa: BLE001 - judging meets the same on its own and says so
            self.failed = error


def takes_gradients(module: ModuleType) -> bool:
    """Whether a function of the reference module names torch's autograd or a backward pass."""
    codes = [f.__code__ for f in vars(module).values() if inspect.isfunction(f)]
    while codes:
        code = codes.pop()
        if GRADIENT_NAMES & set(code.co_names):
            return True
        codes.extend(c for c in code.co_consts if inspect.iscode(c))
    return False
