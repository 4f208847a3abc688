"""Every verdict reason the grader gives, in one registry.

A reason code is part of the result's contract (results.json's `extra_data.reason`): the codes
and their order here are fixed. Each carries what the rest of the grader needs to know about it:

- `hint`: one line for the student under each case that failed for this reason (report, terminal,
  Gradescope, the class summary's commonest reasons); it names only what every one of those shows
  (a message, not the report's map: a case may have none, and the class page has none);
- `load`: the part's code could not be loaded or built, so its cases did not run (the report shows
  one load row, and the first such failure stands for the part);
- `review`: the code broke the process or the rules, not just the numbers, so the class summary
  flags the student for a person to look at;
- `untouched`: the part is still the starter's stub, so every part failing so is said once in the
  terminal, with where to begin (terminal.py), not once a part;
- `earned_by`: where the test suite proves that a submission earns it: `known_wrong` (a known-wrong
  submission under tests/submissions/ on the CPU tier), `known_wrong_gpu` (one whose expect.toml
  says `tier = "gpu"`), `starter` (starter/ itself), `off_gpu` (every speed test on a machine with
  no GPU) or `solutions` (solutions/, on every case). tests/test_wrong_submissions.py holds the
  suite to it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    code: str
    hint: str
    earned_by: str
    load: bool = False
    review: bool = False
    untouched: bool = False


REGISTRY = (
    Reason("ok", "", "solutions"),
    Reason("not_implemented", "The stub still raises NotImplementedError (or, for CUDA, its launcher still returns the "
           "stub's code). Fill in the function body.", "starter", untouched=True),
    Reason("missing_file", "Keep the starter's file names and folders: <assignment>/<file> inside the submission.",
           "known_wrong", load=True),
    Reason("syntax_error", "Python could not parse the file. Fix the line shown, then run `make grade` again.",
           "known_wrong", load=True),
    Reason("import_error", "The file failed while being imported. Import only torch, triton and your own modules.",
           "known_wrong", load=True),
    Reason("missing_entry_point", "The grader calls the function by the name in the handout; keep that name and "
           "signature.", "known_wrong", load=True),
    Reason("compile_error", "The kernel did not compile. Read the compiler's message: it names the line.",
           "known_wrong", load=True),
    Reason("wrong_shape", "Return a tensor of the shape the handout gives (usually the input's shape).", "known_wrong"),
    Reason("wrong_dtype", "Return the input's dtype: compute in float32 inside the kernel, store in the output dtype.",
           "known_wrong"),
    Reason("wrong_result", "Outside the tolerance: only the last block wrong points at a mask, every row wrong at a "
           "reduction or a stride.", "known_wrong"),
    Reason("nan_or_inf", "An overflow, or memory read before it was written: subtract the row max, load with a "
           "mask and other=-inf or 0, write an output before reading it.", "known_wrong"),
    Reason("unwritten_output", "Some outputs were never stored: check the grid covers every row/block and the store "
           "mask.", "known_wrong"),
    Reason("input_modified", "Inputs are read-only: write results into a tensor you allocate.", "known_wrong",
           review=True),
    Reason("forbidden_op", "Something the part does not allow did the work (a torch op it replaces, a kernel not your "
           "own) or, where the part asks for block pointers, a load through pointer arithmetic: the message names it.",
           "known_wrong", review=True),
    Reason("no_kernel_launched", "The work must happen in a kernel defined in your own file, launched on a grid "
           "that is not empty.", "known_wrong", review=True),
    Reason("not_fused", "This part must be a single kernel launch, with no torch op that touches data around it.",
           "known_wrong"),
    Reason("too_slow", "Correct but slower than the threshold: check memory access patterns and block sizes.",
           "known_wrong_gpu"),
    Reason("timeout", "The call did not finish in time: look for a loop that never ends or a huge grid.",
           "known_wrong", review=True),
    Reason("crash", "The process died or raised: the message and traceback show where.", "known_wrong", review=True),
    Reason("out_of_memory", "The call allocated more memory than the machine allows.", "known_wrong", review=True),
    Reason("no_gpu", "Speed is graded on a GPU only; on this machine it is not graded.", "off_gpu"),
    Reason("tampering", "The measurement itself was disturbed. Time your kernel honestly.", "known_wrong_gpu",
           review=True),
)  # fmt: skip

BY_CODE = {reason.code: reason for reason in REGISTRY}
CODES = tuple(BY_CODE)
HINTS = {reason.code: reason.hint for reason in REGISTRY if reason.hint}
LOAD = frozenset(reason.code for reason in REGISTRY if reason.load)
REVIEW = tuple(reason.code for reason in REGISTRY if reason.review)
UNTOUCHED = frozenset(reason.code for reason in REGISTRY if reason.untouched)
# The reasons a child may give for a task it could not finish (a Failure: its own account of the
# student's code); a Failure naming any other code, "ok" above all, is tampering (messages/decoding.py).
CHILD_FAILURES = frozenset({"missing_file", "syntax_error", "import_error", "missing_entry_point", "compile_error",
                            "not_implemented", "crash", "out_of_memory", "tampering", "forbidden_op"})


def hint(code: str) -> str:
    return BY_CODE[code].hint if code in BY_CODE else ""
