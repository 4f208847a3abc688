"""The parent's verdict on what a child reported for one task.

Nothing here trusts the child's opinion: the child reports raw observations (the output file,
the ops it dispatched, the kernels it launched, raw timings) and the parent recomputes inputs
from the seed, computes the float64 reference and decides.
"""

from __future__ import annotations

import statistics

import torch

from grader import cases, numerics
from grader.numerics import Verdict
from grader.spec import Assignment, Case, Part

FLOOR_FRACTION = 0.5  # a time under half the memory roofline is not physics, it is tampering
HIDDEN_MS = 0.25  # host-visible time the events did not see, beyond the reference's own
# ... or this share of the event time, if more. An honest call's host-only time is a constant
# (recording events, waking from the synchronize), the reference's own: it does not grow with
# the kernel, so a share above this means work the events never saw.
HIDDEN_SHARE = 0.5
COMPUTE_BOUND_INTENSITY = 10.0  # FLOPs per byte


def load_output(outcome: dict, device: str) -> object:
    output = outcome.get("output", {})
    if output.get("type") != "Tensor":
        return output.get("type", "nothing")
    return torch.load(output["file"], map_location=device, weights_only=True)


def integrity(part: Part, outcome: dict) -> Verdict | None:
    forbidden = sorted(set(outcome.get("ops", [])) & set(part.forbidden_ops))
    if forbidden:
        ops = ", ".join(f"aten::{op}" for op in forbidden)
        return Verdict("forbidden_op", f"the call ran torch's {ops}; this assignment asks for your own kernel instead",
                       {"ops": forbidden})  # fmt: skip
    launches = outcome.get("launches", [])  # Triton launches; a CUDA part's kernels are its own by construction
    if part.kernel == "triton" and not any(launch["own"] for launch in launches):
        others = ", ".join(sorted({launch["kernel"] for launch in launches}))
        seen = f" (kernels launched, none defined in your files: {others})" if others else ""
        return Verdict("no_kernel_launched", f"no Triton kernel of yours was launched during the call{seen}")
    return fusion(part, outcome)


def fusion(part: Part, outcome: dict) -> Verdict | None:
    """A fused part moves its data once: every extra kernel, and every torch op that touches data,
    is another round trip through memory."""
    if part.max_kernels is None:
        return None
    per_call = sum(launch.get("count", 1) for launch in outcome.get("launches", [])) / max(outcome.get("calls", 1), 1)
    compute = outcome.get("compute_ops", [])
    if per_call <= part.max_kernels and not compute:
        return None
    seen = []
    if per_call > part.max_kernels:
        names = ", ".join(dict.fromkeys(launch["kernel"] for launch in outcome["launches"]))
        seen.append(f"{per_call:g} kernel launches per call ({names})")
    if compute:
        seen.append("torch ops that each run a kernel of their own (" + ", ".join(f"aten::{op}" for op in compute) + ")")
    limit = "one kernel" if part.max_kernels == 1 else f"at most {part.max_kernels} kernels"
    return Verdict("not_fused", f"this part must be {limit} and nothing else; the call ran {' and '.join(seen)}",
                   {"kernels_per_call": per_call, "compute_ops": compute})  # fmt: skip


def harness_tampering(outcome: dict) -> Verdict | None:
    """The child saw the harness's objects rebound, or the result is not a plain tensor."""
    patched = outcome.get("patched")
    if patched:
        objects = patched["objects"]
        names = ", ".join(objects[:6]) + (f" and {len(objects) - 6} more" if len(objects) > 6 else "")
        when = "while your file was imported" if patched["at_import"] else "during a call"
        return Verdict("tampering", f"{names} {'was' if len(objects) == 1 else 'were'} replaced {when}: the grader's "
                       "clocks, CUDA events and functions are not yours to change", {"patched": objects})  # fmt: skip
    output = outcome.get("output", {})
    if output.get("type") == "Tensor subclass":
        return Verdict("tampering", f"returned a {output['class']}, a subclass of torch.Tensor: its methods would run your "
                       "code while the grader reads the result, outside the call; return a plain torch.Tensor")  # fmt: skip
    return None


def aliasing(observed: dict) -> Verdict | None:
    """The output is an input, or a view of one (an input changed in place earns input_modified instead)."""
    aliases = observed.get("aliases", [])
    if aliases and not observed.get("modified_inputs"):
        return Verdict("tampering", f"the returned tensor shares memory with the input {', '.join(aliases)}: it is "
                       "that input or a view of it, so the grader's own input doubles as your result; return a new tensor")  # fmt: skip
    return None


def judge_case(assignment: Assignment, part: Part, case: Case, seed: int, outcome: dict, device: str) -> Verdict:
    verdict = harness_tampering(outcome)
    if verdict:
        return verdict
    if "error" in outcome:
        return Verdict(outcome["error"]["reason"], outcome["error"]["message"])
    verdict = integrity(part, outcome) or aliasing(outcome)
    if verdict:
        return verdict
    inputs = cases.make_inputs(assignment, part, case, seed, device)
    reference = cases.reference_output(assignment, part, inputs)
    out = load_output(outcome, device)
    verdict = numerics.judge(
        out,
        reference,
        cases.DTYPES[case.dtype],
        part.tolerance_for(case.dtype),
        outcome.get("modified_inputs", []),
        outcome.get("overrun", 0),
    )
    unstable = outcome.get("unstable", 0)
    if unstable and verdict.reason in ("ok", "wrong_result"):
        race = (f"the output changed between {part.repeats} runs on the same inputs ({unstable} element(s) differed): "
                "a race, such as a missing __syncthreads or a read of memory another thread has not written yet")
        message = race if verdict.ok else f"{verdict.message}; and {race}"
        return Verdict("wrong_result", message, {**verdict.metrics, "unstable": unstable})
    if verdict.ok and "followup" in outcome:
        followed = judge_followup(assignment, part, case, outcome["followup"], device)
        if followed and not followed.ok:
            return followed
        verdict.metrics.update(followed.metrics if followed else {})  # the peak memory, where measured
    return verdict


def judge_followup(assignment: Assignment, part: Part, case: Case, followup: dict, device: str) -> Verdict | None:
    """A second call, on new inputs of the same shape written into the same memory as the first
    ones, must return a new tensor computed from them: a cached result comes back stale. A part
    whose memory is measured gets that verdict (ok, with the figures, or out_of_memory)."""
    verdict = harness_tampering(followup) or aliasing(followup)
    if verdict:
        return verdict
    inputs = cases.make_inputs(assignment, part, case, followup["seed"], device)
    reference = cases.reference_output(assignment, part, inputs)
    checked = numerics.judge(load_output(followup, device), reference, cases.DTYPES[case.dtype],
                             part.tolerance_for(case.dtype), followup.get("modified_inputs", []),
                             followup.get("overrun", 0))  # fmt: skip
    if not checked.ok and followup.get("same_as_first"):
        return Verdict("tampering", "a second call, on new inputs of the same shape in the same memory, returned the "
                       "first call's output again, bit for bit: the result was cached (by shape or by data_ptr()) "
                       "instead of computed from each call's inputs", checked.metrics)  # fmt: skip
    if followup.get("reuses_first_output"):
        return Verdict("tampering", "a second call returned a tensor in the memory of the first call's output, "
                       "overwriting it: return a new tensor from every call, not a buffer kept from an earlier one")  # fmt: skip
    if not checked.ok:
        return Verdict(checked.reason, f"on a second call, with new inputs of the same shape: {checked.message}",
                       checked.metrics)  # fmt: skip
    return memory(part, inputs, reference.numel() * cases.DTYPES[case.dtype].itemsize, followup, device)


def memory(part: Part, inputs: dict, output_bytes: int, followup: dict, device: str) -> Verdict | None:
    """At its peak, the inputs plus what the call allocated must stay within the part's multiple of
    the bytes of its inputs and output: an algorithm that keeps an intermediate the size of the
    problem squared in memory does not. None where the part's memory is not measured."""
    if part.peak_memory is None or "allocated_bytes" not in followup:
        return None
    given = sum(cases.nbytes(t) for t in cases.tensors(inputs).values())
    peak = given + followup["allocated_bytes"]
    limit = part.peak_memory * (given + output_bytes)
    figures = {"peak_bytes": peak, "allowed_bytes": limit}
    if peak <= limit:
        return Verdict("ok", f"peak memory {peak / limit:.0%} of what is allowed", figures)
    counted = "torch's peak allocation during the call" if device == "cuda" else "the tensors the call allocated"
    mib = 2**20
    return Verdict("out_of_memory", f"the inputs plus what the call allocated came to {peak / mib:.1f} MiB at the peak "
                   f"({counted}: {followup['allocated_bytes'] / mib:.1f} MiB), over the {limit / mib:.1f} MiB allowed, "
                   f"{part.peak_memory:g}x the bytes of the inputs and the output: keep the intermediate results in "
                   "registers and shared memory instead of writing them out whole", figures)  # fmt: skip


def _median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def speed_metrics(outcome: dict, traffic: dict) -> dict:
    """Medians, spread, achieved bandwidth and throughput, and the share of the copy roofline."""
    student, baseline = outcome["samples"]["student"], outcome["samples"]["baseline"]
    student_ms = max(_median(student["event_ms"]), 1e-6)
    baseline_ms = _median(baseline["event_ms"])
    nbytes, flops = traffic.get("bytes", 0), traffic.get("flops", 0)
    gbps = nbytes / (student_ms * 1e-3) / 1e9
    return {
        "student_ms": student_ms,
        "baseline_ms": baseline_ms,
        "ratio": baseline_ms / student_ms,
        "student_spread_ms": [min(student["event_ms"]), max(student["event_ms"])],
        "baseline_spread_ms": [min(baseline["event_ms"]), max(baseline["event_ms"])],
        "student_hidden_ms": _median(student["hidden_ms"]),
        "baseline_hidden_ms": _median(baseline["hidden_ms"]),
        "samples": len(student["event_ms"]),
        "remeasured": outcome.get("remeasured", False),
        "bytes": nbytes,
        "flops": flops,
        "gbps": gbps,
        "baseline_gbps": nbytes / (baseline_ms * 1e-3) / 1e9,
        "tflops": flops / (student_ms * 1e-3) / 1e12,
        "baseline_tflops": flops / (baseline_ms * 1e-3) / 1e12,
        # Above this many FLOPs per byte the arithmetic units, not memory, set the pace on any
        # current GPU (an H200's ridge is ~164 in float16, ~12 in float32 without TF32).
        "compute_bound": bool(nbytes) and flops / nbytes > COMPUTE_BOUND_INTENSITY,
        "copy_gbps": outcome.get("copy_gbps"),
        "roofline_share": gbps / outcome["copy_gbps"] if outcome.get("copy_gbps") else None,
        "device_name": outcome.get("device_name"),
    }


def tampering(metrics: dict) -> str | None:
    floor_ms = metrics["bytes"] / (metrics["copy_gbps"] * 1e9) * 1e3 if metrics.get("copy_gbps") else 0.0
    if metrics["student_ms"] < FLOOR_FRACTION * floor_ms:
        return (f"{metrics['student_ms']:.4f} ms is under half the time that moving {metrics['bytes']} bytes takes at "
                f"the device's measured copy bandwidth ({floor_ms:.4f} ms): the events did not time the real work")
    hidden = metrics["student_hidden_ms"] - metrics["baseline_hidden_ms"]
    if hidden > max(HIDDEN_MS, HIDDEN_SHARE * metrics["student_ms"]):
        return (f"the host waited {hidden:.3f} ms per call beyond what the CUDA events saw: work ran outside the "
                "timed stream (a side stream, or work left lazy)")
    return None  # fmt: skip


def judge_bench(assignment: Assignment, part: Part, case: Case, task: dict, outcome: dict, device: str) -> Verdict:
    """The speed verdict, with credit in the metrics; the output of a timed call must be right too."""
    verdict = harness_tampering(outcome)
    if verdict:
        return verdict
    if "error" in outcome:
        return Verdict(outcome["error"]["reason"], outcome["error"]["message"])
    inputs = cases.make_inputs(assignment, part, case, task["pool_seeds"][outcome["keep_pool_index"]], device)
    reference = cases.reference_output(assignment, part, inputs)
    checked = numerics.judge(load_output(outcome, device), reference, cases.DTYPES[case.dtype],
                             part.tolerance_for(case.dtype))  # fmt: skip
    if not checked.ok:
        return Verdict(checked.reason, f"the output of a timed call was wrong: {checked.message}", checked.metrics)
    metrics = speed_metrics(outcome, cases.traffic(assignment, part, inputs))
    cheat = tampering(metrics)
    if cheat:
        return Verdict("tampering", cheat, metrics)
    metrics["credit"] = part.performance.credit_for(metrics["ratio"])
    full = part.performance.tiers[0][0]
    text = (f"{metrics['student_ms']:.4f} ms vs torch {metrics['baseline_ms']:.4f} ms: {metrics['ratio']:.2f}x "
            f"(full credit from {full:.2f}x); ")
    if metrics["compute_bound"]:
        text += f"{metrics['tflops']:.1f} TFLOP/s against torch's {metrics['baseline_tflops']:.1f}"
    else:
        text += f"{metrics['gbps']:.0f} GB/s"
        if metrics["roofline_share"]:
            text += f", {metrics['roofline_share']:.0%} of the measured copy bandwidth"
    return Verdict("ok" if metrics["credit"] == 1.0 else "too_slow", text, metrics)  # fmt: skip
