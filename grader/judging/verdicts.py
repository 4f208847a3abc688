"""The parent's verdict on what a child reported for one task.

Nothing here trusts the child's opinion: the child reports raw observations (its outputs'
bytes, the ops and kernels that ran, raw timings) and the parent recomputes the inputs from the
seed, computes the float64 reference and decides. Whose work it was is integrity.py's question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from grader.assignment import cases, output_sizes
from grader.judging import diagnosis, integrity, numerics, steadiness
from grader.messages import kept_file
from grader.running.child_run import OutputFile
from grader.messages.reports import Activity, BenchReport, CaseReport, Failure, Followup, Observation, Outcome
from grader.judging.numerics import Verdict
from grader.judging.speed import median, speed_metrics, tampering
from grader.assignment.spec import Assignment, Case, Part
from grader.witness import judge as witness_judge

# Slack on a peak-memory limit: torch's allocator hands out blocks of 512 bytes at least, so a
# call with a few small buffers (a row statistic of a 1 x 1 x 1 x 64 attention) must not fail by
# the allocator's rounding. 64 KiB is a hundred such blocks, and nothing next to a real excess.
MEMORY_SLACK_BYTES = 64 * 1024
TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
                "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}  # fmt: skip


@dataclass
class TaskResult:
    """One task's outcome as the parent received it, with the outputs it wrote for the task."""

    outcome: Outcome
    activity: Activity | None = None  # for a Failure: what ran before it
    outputs: dict[str, OutputFile] = field(default_factory=dict)
    died: bool = False  # the child process ended in the middle of this task (the outcome says how)
    seconds: float = 0.0  # from the task's start to its end, on the parent's clock (0: not run in a child)
    witness: witness_judge.TaskWitness | None = None  # what the grader's witness saw of it (GPU tier)


def size(nbytes: float) -> str:
    """Bytes in the unit that shows them: 1408 B, 96.0 KiB, 3.2 MiB, 1.50 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{nbytes:.0f} B"


def load_output(observation: Observation, outputs: dict[str, OutputFile], device: str) -> object:
    """The returned value as the parent can judge it: a tensor read from the parent's own file,
    a shape-only tensor for an output too large to send, or the name of what came back."""
    returned = observation.returned
    if returned.kind != "tensor":
        return returned.type_name
    found = outputs.get(returned.output)
    if found is None or found.dtype not in TORCH_DTYPES:
        return "nothing"
    dtype = TORCH_DTYPES[found.dtype]
    if not found.sent:
        return torch.empty(found.shape, dtype=dtype, device="meta")
    return found.load(device).view(dtype).reshape(found.shape)


def subclass(observation: Observation) -> Verdict | None:
    if observation.returned.kind == "subclass":
        return Verdict("tampering", f"returned a {observation.returned.type_name}, a subclass of torch.Tensor: its "
                       "methods would run your code while the grader reads the result, outside the call; return a "
                       "plain torch.Tensor")  # fmt: skip
    return None


def aliasing(observed: Observation) -> Verdict | None:
    """The output is an input, or a view of one (an input changed in place earns input_modified instead)."""
    if observed.aliases and not observed.modified_inputs:
        return Verdict("tampering", f"the returned tensor shares memory with the input {', '.join(observed.aliases)}: "
                       "it is that input or a view of it, so the grader's own input doubles as your result; return a "
                       "new tensor")  # fmt: skip
    return None


def _numerics(assignment: Assignment, part: Part, case: Case, seed: int, observation: Observation,
              outputs: dict, device: str, draw=cases.case_inputs) -> tuple[Verdict, dict, torch.Tensor]:  # fmt: skip
    """`draw` makes the inputs as the child made them: a correctness case's (`case_inputs`: a case
    both tiers grade comes from the CPU's generator) or a benchmark's (`make_inputs`, drawn on the
    GPU where it runs: a timed output judged against the CPU generator's draw is wrong everywhere)."""
    inputs = draw(assignment, part, case, seed, device)
    reference = cases.reference_output(assignment, part, inputs)
    # The load copies from pageable memory, which waits for the reference's GPU work queued above: a
    # sampling profiler charges that work to the load (FlashAttention's float64 gradients, on a GPU).
    out, tolerance = load_output(observation, outputs, device), part.tolerance_for(case.dtype)
    verdict = numerics.judge(out, reference, cases.DTYPES[case.dtype], tolerance, observation.modified_inputs,
                             observation.overrun)  # fmt: skip
    if not verdict.ok:
        found = diagnosis.diagnose(verdict.reason, out, reference, tolerance, inputs,
                                   lambda changed: cases.reference_output(assignment, part, changed))  # fmt: skip
        if found:
            verdict.metrics["diagnosis"] = found[0]
            verdict.message += f". Likely cause: {found[1]}"
    return verdict, inputs, reference


def judge_case(assignment: Assignment, part: Part, case: Case, seed: int, result: TaskResult, device: str,
               cuda_kernels: set[str] = frozenset(), own: set[str] = frozenset()) -> Verdict:  # fmt: skip
    """`cuda_kernels`: the kernels of the student's built .cu; `own`: every kernel name of the
    student's (those and the Triton kernels in their files), for the witness's verdict."""
    report = result.outcome
    verdict = integrity.harness_tampering(result.activity or getattr(report, "activity", None))
    if verdict:
        return verdict
    if isinstance(report, Failure):
        return Verdict(report.reason, report.message)
    if not isinstance(report, CaseReport):
        return Verdict("crash", "the child reported something other than a case's result")
    witnessed = result.witness is not None
    # The witness's evidence first: the child's own report (its activity, its observation) is what
    # student code in control of its process could rewrite; the witness's records are not.
    verdict = ((witness_judge.case(part, result.witness, report.activity, own,
                                   output_sizes.output_bytes(assignment, part, case)) if witnessed else None)
               or subclass(report.observation)
               or integrity.integrity(part, report.activity, device, report.calls, cuda_kernels, witnessed)
               or aliasing(report.observation) or target_verdict(case, report.activity)
               or integrity.required_loads(part, report.activity))  # fmt: skip
    if verdict:
        return verdict
    try:
        return _judged_outputs(assignment, part, case, seed, report, result.outputs, device)
    except kept_file.Rewritten as rewritten:
        return Verdict("tampering", f"{rewritten}: an output was replaced after the grader's harness sent it")


def _judged_outputs(assignment: Assignment, part: Part, case: Case, seed: int, report: CaseReport, outputs: dict,
                    device: str) -> Verdict:  # fmt: skip
    """A case's outputs against its reference, its first call's and its followup's: on the GPU tier
    each read from the child's memory file (kept_file.Rewritten where it changed after the harness
    put it there)."""
    verdict, _, _ = _numerics(assignment, part, case, seed, report.observation, outputs, device)
    verdict = tf32_verdict(case, report.activity, verdict)
    if report.unstable and verdict.reason in ("ok", "wrong_result"):
        race = (f"the output changed between {part.repeats} runs on the same inputs ({report.unstable} element(s) "
                "differed): a race, such as a missing __syncthreads or a read of memory another thread has not written yet")
        message = race if verdict.ok else f"{verdict.message}; and {race}"
        return Verdict("wrong_result", message, {**verdict.metrics, "unstable": report.unstable})
    if verdict.ok and report.followup is not None:
        followed = judge_followup(assignment, part, case, report.followup, outputs, device)
        if followed and not followed.ok:
            return followed
        verdict.metrics.update(followed.metrics if followed else {})  # the peak memory, where measured
    return verdict


def target_verdict(case: Case, activity: Activity) -> Verdict | None:
    """CPU tier: what the GPU will say of a kernel the interpreter ran happily (gpu_target.py)."""
    for report in activity.targets:
        if report.autotuned and not report.ok and report.skippable and any(
            r.ok for r in activity.targets if r.kernel == report.kernel
        ):
            continue  # the GPU's autotuner skips a config that runs out of resources, when another one fits
        if not report.ok:
            return Verdict("compile_error", f"{report.kernel} ({report.where}) runs in the interpreter but does not "
                           f"compile for the GPU, which will refuse it: {report.error}")  # fmt: skip
        if report.shared_limit and report.shared_bytes > report.shared_limit and not (
            report.autotuned and any(r.kernel == report.kernel and r.shared_bytes <= r.shared_limit for r in activity.targets)
        ):
            return Verdict("compile_error", f"{report.kernel} ({report.where}) needs {size(report.shared_bytes)} of "
                           f"shared memory, more than the GPU's {size(report.shared_limit)}: on the GPU it fails with "
                           "'out of resource: shared memory'; loop over the row in blocks instead of loading it whole")  # fmt: skip
        if report.missing_allocator:
            return Verdict("crash", f"{report.kernel} ({report.where}) makes tensor descriptors inside the kernel, which "
                           "on the GPU need scratch memory from an allocator: without triton.set_allocator(...) the "
                           "launch fails there")  # fmt: skip
    return None


def tf32_verdict(case: Case, activity: Activity, verdict: Verdict) -> Verdict:
    """CPU tier: a float32 case whose output is right here fails on the GPU when a kernel's float32
    tl.dot runs in TF32 there. Only an output of the right shape and dtype, judged ok or wrong, gets
    this verdict: the GPU would name any other problem first, as the interpreter did."""
    if verdict.reason not in ("ok", "wrong_result") or case.dtype != "float32" or case.tier != "both":
        return verdict
    for report in activity.targets:
        if report.tf32_dots:
            message = (f"{report.kernel} ({report.where}) has a float32 tl.dot that the GPU runs in TF32 (10-bit "
                       "mantissas, relative errors near 1e-3, far over this case's tolerance): pass "
                       "input_precision=\"ieee\" to tl.dot; the interpreter multiplies exactly, so only the GPU shows it")
            return Verdict("wrong_result", message if verdict.ok else f"{verdict.message}; and {message}", verdict.metrics)
    return verdict


def judge_followup(assignment: Assignment, part: Part, case: Case, followup: Followup, outputs: dict,
                   device: str) -> Verdict | None:  # fmt: skip
    """A second call, on new inputs of the same shape written into the same memory as the first
    ones, must return a new tensor computed from them: a cached result comes back stale. A part
    whose memory is measured gets that verdict (ok, with the figures, or out_of_memory)."""
    verdict = subclass(followup.observation) or aliasing(followup.observation)
    if verdict:
        return verdict
    checked, inputs, reference = _numerics(assignment, part, case, followup.seed, followup.observation, outputs, device)
    if not checked.ok and followup.same_as_first:
        return Verdict("tampering", "a second call, on new inputs of the same shape in the same memory, returned the "
                       "first call's output again, bit for bit: the result was cached (by shape or by data_ptr()) "
                       "instead of computed from each call's inputs", checked.metrics)  # fmt: skip
    if followup.reuses_first_output:
        return Verdict("tampering", "a second call returned a tensor in the memory of the first call's output, "
                       "overwriting it: return a new tensor from every call, not a buffer kept from an earlier one")  # fmt: skip
    if not checked.ok:
        return Verdict(checked.reason, f"on a second call, with new inputs of the same shape: {checked.message}",
                       checked.metrics)  # fmt: skip
    return memory(part, inputs, reference.numel() * cases.DTYPES[case.dtype].itemsize, followup, device)


def memory(part: Part, inputs: dict, output_bytes: int, followup: Followup, device: str) -> Verdict | None:
    """At its peak, the inputs plus what the call allocated must stay within the part's multiple of
    the bytes of its inputs and output (plus the allocator's slack): an algorithm that keeps an
    intermediate the size of the problem squared in memory does not. None where not measured."""
    if part.peak_memory is None:
        return None
    given = sum(cases.nbytes(t) for t in cases.tensors(inputs).values())
    peak = given + followup.allocated_bytes
    limit = part.peak_memory * (given + output_bytes) + MEMORY_SLACK_BYTES
    figures = {"peak_bytes": peak, "allowed_bytes": limit}
    if peak <= limit:
        return Verdict("ok", f"peak memory {peak / limit:.0%} of what is allowed", figures)
    counted = "torch's peak allocation during the call" if device == "cuda" else "the tensors the call allocated"
    return Verdict("out_of_memory", f"the inputs plus what the call allocated came to {size(peak)} at the peak "
                   f"({counted}: {size(followup.allocated_bytes)}), over the {size(limit)} allowed, "
                   f"{part.peak_memory:g}x the bytes of the inputs and the output: keep the intermediate results in "
                   "registers and shared memory instead of writing them out whole", figures)  # fmt: skip


def witness_times(witness: witness_judge.TaskWitness, report: BenchReport) -> dict:
    """The medians of the witness's own times of the timed calls, beside the events' (shown, not
    graded: the events time, the witness checks their ratio)."""
    seen = witness_judge.timed_windows(witness, report)
    if isinstance(seen, str):
        return {}
    return {"witness_student_ms": median(seen["student"][1]), "witness_baseline_ms": median(seen["baseline"][1])}


def timed_calls(part: Part, report: BenchReport) -> Verdict | None:
    """Every timed call's output was checked in the child against torch's on the same inputs, and
    the torch ops of the timed stretch are judged like those of any call."""
    wrong = [check for check in report.checks if not check.agrees]
    if wrong:
        return Verdict("tampering", f"{len(wrong)} of {len(report.checks)} timed calls returned a wrong output "
                       f"(call {wrong[0].rep}: {wrong[0].detail}) although the correctness cases passed: the timed calls "
                       "did not do the work that was checked", {"wrong_timed_calls": len(wrong)})  # fmt: skip
    if not report.checks:
        return Verdict("crash", "no timed call was reported")
    return integrity.harness_tampering(report.activity) or integrity.forbidden_ops(part, report.activity,
                                                                                   len(report.checks))


def judge_bench(assignment: Assignment, part: Part, case: Case, result: TaskResult, device: str,
                own: set[str] = frozenset()) -> Verdict:  # fmt: skip
    """The speed verdict, with credit in the metrics; the output of a timed call must be right too.
    Where the grader's witness recorded the child, its times replace the child's CUDA events."""
    report = result.outcome
    verdict = integrity.harness_tampering(result.activity)
    if verdict:
        return verdict
    if isinstance(report, Failure):
        return Verdict(report.reason, report.message)
    if not isinstance(report, BenchReport) or report.kept is None:
        return Verdict("crash", "the child reported something other than a benchmark's result")
    verdict = timed_calls(part, report)
    if verdict:
        return verdict
    if result.witness is not None:
        verdict = witness_judge.bench(part, result.witness, report, own)
        if verdict:
            return verdict
    try:
        checked, inputs, _ = _numerics(assignment, part, case, report.kept_seed, report.kept, result.outputs, device,
                                       cases.make_inputs)  # fmt: skip
    except kept_file.Rewritten as rewritten:
        return Verdict("tampering", f"{rewritten}: a timed call's output was replaced after it was timed")
    if not checked.ok:
        return Verdict(checked.reason, f"the output of a timed call was wrong: {checked.message}", checked.metrics)
    metrics = speed_metrics(report, cases.traffic(assignment, part, inputs))
    if result.witness is not None:
        metrics.update(witness_times(result.witness, report))
    cheat = tampering(metrics, witnessed=result.witness is not None)
    if cheat:
        return Verdict("tampering", cheat, metrics)
    metrics["credit"] = part.performance.credit_for(metrics["ratio"])
    metrics["tiers"] = [list(tier) for tier in part.performance.tiers]  # (ratio at least, share), best first
    full = part.performance.tiers[0][0]
    text = (f"{metrics['student_ms']:.4f} ms vs torch {metrics['baseline_ms']:.4f} ms: {metrics['ratio']:.2f}x "
            f"(full credit from {full:.2f}x); ")
    if metrics["compute_bound"]:
        text += f"{metrics['tflops']:.1f} TFLOP/s against torch's {metrics['baseline_tflops']:.1f}"
    else:
        text += f"{metrics['gbps']:.0f} GB/s"
        if metrics["roofline_share"]:
            text += f", {metrics['roofline_share']:.0%} of the measured copy bandwidth"
    if metrics["student_disturbed"] and not steadiness.disturbed(report.baseline.event_ms):
        text += (f"; your timings spread from {metrics['student_spread_ms'][0]:.4f} to "
                 f"{metrics['student_spread_ms'][1]:.4f} ms ({metrics['student_disturbed']} of {metrics['samples']} at "
                 f"{steadiness.DISTURBED_FACTOR:g}x your fastest or slower, torch's from "
                 f"{metrics['baseline_spread_ms'][0]:.4f} to {metrics['baseline_spread_ms'][1]:.4f} ms) after "
                 f"{len(metrics['retaken'])} retake(s): the median is graded")  # fmt: skip
    if steadiness.disturbed(report.baseline.event_ms):
        text += (f"; torch's own timings were disturbed ({metrics['reference_disturbed']} of {metrics['samples']} "
                 f"at {steadiness.DISTURBED_FACTOR:g}x their fastest or slower, after "
                 f"{report.disturbed_retakes} retake(s)): something else used the GPU, so this figure may be low; "
                 "ask for a regrade")  # fmt: skip
    shown = shown_metrics(part, report, metrics["student_ms"])
    if shown:
        metrics["shown"] = shown
        text += f"; {shown_text(shown)}"
    return Verdict("ok" if metrics["credit"] == 1.0 else "too_slow", text, metrics)  # fmt: skip


def shown_metrics(part: Part, report: BenchReport, student_ms: float) -> dict | None:
    """The part's shown baseline (spec.Shown) against the student's time, or why it is missing."""
    if part.shown is None:
        return None
    shown_ms = median(report.shown.event_ms) if report.shown else float("nan")
    if not (math.isfinite(shown_ms) and shown_ms > 0):
        return {"label": part.shown.label, "error": report.shown_error or "it was not timed"}
    return {"label": part.shown.label, "ms": shown_ms, "ratio": shown_ms / student_ms}


def shown_text(shown: dict) -> str:
    if "error" in shown:
        return f"{shown['label']} could not be timed (shown, not graded): {shown['error']}"
    return f"against {shown['label']} ({shown['ms']:.4f} ms) {shown['ratio']:.2f}x, shown, not graded"


def probe_verdict(part: Part, found: TaskResult) -> Verdict:
    """The CPU tier's verdict on a CUDA part: the launcher, called once without a GPU, either
    returned the stub's not-implemented code or tried to launch. Real launchers check their
    launch and end the process when it fails (llm.c's `cudaCheck` calls exit(1)): without a
    GPU every launch fails, so that ending is expected here, and says nothing of the GPU tier."""
    compiled = f"{part.file} compiled with nvcc; CUDA parts run on the GPU tier only"
    tampering = integrity.harness_tampering(found.activity)
    if tampering:
        return tampering
    if found.died and isinstance(found.outcome, Failure) and found.outcome.reason == "crash":
        first = found.outcome.message.split("\n", 1)[0]
        return Verdict("no_gpu", f"{compiled}. Called without a GPU, its launcher ended the process ({first}): "
                                 "expected where every CUDA call fails, as a launch check that exits does")
    if isinstance(found.outcome, Failure):
        return Verdict(found.outcome.reason, found.outcome.message)
    return Verdict("no_gpu", compiled)
