"""docs/measurements.md: one current table per measured figure, written from records, never by hand.

Each table is a record, `docs/measurements/<name>.json`: its title, what it measures and how to
measure it again, where and with what it was measured (date, machine or GPU, driver, torch, Triton,
the commit), its columns and rows. A re-measure writes the record again, from what the measuring
command left (a results.json, a comparison's JSON, pytest-benchmark's JSON, a timed `make test`),
and the page is rendered again: the table is replaced, nothing is appended. History is git's.

    .venv/bin/python tools/measurements.py render                 # docs/measurements.md from the records
    .venv/bin/python tools/measurements.py check                  # exit 1 if the page is not what render writes
    .venv/bin/python tools/measurements.py solutions-speed results.json
    .venv/bin/python tools/measurements.py warm-parity comparison.json cold/results.json
    .venv/bin/python tools/measurements.py batch-parity comparison.json serial/results.json [--name class-of-20-gelu]
    .venv/bin/python tools/measurements.py report-speed bench-report.json
    .venv/bin/python tools/measurements.py profile profile.json results.json      # `make profile`'s
    .venv/bin/python tools/measurements.py corpus corpus-results --machine GPU --gpu-torch VERSION
    .venv/bin/python tools/measurements.py steady-grade steady.json alone-1/results.json [--note TEXT]
    .venv/bin/python tools/measurements.py phases cold=alone-1/results.json warm=alone-2/results.json ...
    .venv/bin/python tools/measurements.py cpu-tier OLD=cpu-tier/OLD-1/results.json NEW=cpu-tier/NEW-1/results.json ...
    .venv/bin/python tools/measurements.py service-pages pages.json --condition idle
    .venv/bin/python tools/measurements.py clock-ramp clock-ramp.json        # tools/clock_ramp.py's
    .venv/bin/python tools/measurements.py suite --condition idle [--busy] [--without-bwrap] [--home DIR]

`warm-parity` and `batch-parity` read the `--json` of tools/warm_parity.py and tools/batch_parity.py.
`suite` measures the test suite the way a newcomer meets it: a fresh clone of HEAD, an empty HOME
(so every cache is cold: the grader's, Triton's, pip's, torch's), the set-up (`make .venv/.ready`)
and then `make test`, timed apart; `--busy` keeps every core busy with spinning processes the whole
time, `--without-bwrap` hides bubblewrap from the PATH (the grader then runs unsandboxed). It
replaces that condition's row of the suite's table. `--driver` gives the GPU driver where
`nvidia-smi` cannot be asked.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from grader.kernels.ncu import KernelProfile  # noqa: E402

RECORDS = REPO / "docs" / "measurements"
PAGE = REPO / "docs" / "measurements.md"
PROVENANCE = ("date", "machine", "driver", "torch", "triton", "commit")
HEADER = """# Measurements

Each figure the documentation quotes, in one current table, with where and with what it was
measured. `tools/measurements.py` writes this page from the records in `docs/measurements/`
(one JSON file per table); a re-measure replaces its table (the tool's docstring says how),
and older figures live in git's history. Do not edit this page by hand: `make test` checks
that it is what the tool writes.
"""


def record_path(name: str) -> Path:
    return RECORDS / f"{name}.json"


def load_records() -> list[dict]:
    records = [json.loads(path.read_text()) for path in sorted(RECORDS.glob("*.json"))]
    return sorted(records, key=lambda r: (r.get("order", 99), r["name"]))


def _cell(value: object) -> str:
    return "-" if value in (None, "") else str(value).replace("|", "\\|")


def _table(columns: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    return lines + ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]


def render(records: list[dict]) -> str:
    """The page: a section per record, its provenance as a one-row table (unless each row carries
    its own), then its figures."""
    parts = [HEADER]
    for record in records:
        parts.append(f"## {record['title']}\n")
        parts.append(record["about"].strip() + "\n")
        if record.get("measured"):
            parts.append("\n".join(_table(list(PROVENANCE), [[record["measured"].get(k) for k in PROVENANCE]])) + "\n")
        parts.append("\n".join(_table(record["columns"], record["rows"])) + "\n")
        if record.get("notes"):
            parts.append(record["notes"].strip() + "\n")
    return "\n".join(parts)


def with_row(fresh: dict, row: list) -> dict:
    """The kept record of `fresh`'s name (or `fresh`, where none is kept yet) with `row` in place of
    the row of its condition (the first column): a table of conditions, each measured again alone."""
    path = record_path(fresh["name"])
    record = json.loads(path.read_text()) if path.exists() else fresh
    record["rows"] = [r for r in record["rows"] if r[0] != row[0]] + [row]
    return record


def write_record(record: dict) -> None:
    RECORDS.mkdir(parents=True, exist_ok=True)
    record_path(record["name"]).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    PAGE.write_text(render(load_records()))


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip() or "-"


def _driver(given: str | None) -> str:
    if given:
        return given
    with contextlib.suppress(OSError):
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "-"
    return "-"


def provenance(results: dict, driver: str | None) -> dict:
    """Where a results.json was measured: its environment (results.json's extra_data), today, HEAD."""
    env = results.get("extra_data", {})
    return {"date": datetime.date.today().isoformat(), "machine": env.get("gpu") or env.get("platform", "-"),
            "driver": _driver(driver), "torch": env.get("torch_version", "-"), "triton": env.get("triton_version", "-"),
            "commit": _commit()}  # fmt: skip


def figures_measured(figures: dict, driver: str | None) -> dict:
    """Where a GPU tool's figures (a JSON naming its `device` and `torch`) were measured: today, HEAD."""
    return {"date": datetime.date.today().isoformat(), "machine": figures.get("device", "-"), "driver": _driver(driver),
            "torch": figures.get("torch", "-"), "triton": _pinned_triton(), "commit": _commit()}  # fmt: skip


def solutions_speed(results_path: Path, driver: str | None) -> dict:
    """Every timed benchmark of a GPU grading of solutions/: its ratio to torch and its rate."""
    results = json.loads(results_path.read_text())
    rows = []
    for test in results["tests"]:
        extra, m = test["extra_data"], test["extra_data"].get("metrics", {})
        if extra["kind"] != "performance" or not m.get("ratio"):
            continue
        rate = f"{m['tflops']:.1f} TFLOP/s" if m.get("compute_bound") else f"{m.get('gbps', 0):.0f} GB/s"
        rows.append([test["name"], f"{m['ratio']:.3f}x", rate, f"{test['score']:g} / {test['max_score']:g}"])
    return {"name": "solutions-speed", "order": 10, "title": "The solutions' speed against torch",
            "about": "Every timed benchmark of one grading of `solutions/` on a GPU (`.venv/bin/python -m grader grade "
                     "--submission solutions --device cuda`): torch's time over the solution's, and the rate it "
                     "reached. Re-measure: `tools/measurements.py solutions-speed results/results.json`.",
            "measured": provenance(results, driver), "columns": ["benchmark", "solution / torch", "rate", "points"],
            "rows": rows}  # fmt: skip


def warm_parity(summary_path: Path, results_path: Path, driver: str | None) -> dict:
    """tools/warm_parity.py's comparison: solutions/ with the compilers' cache cold, then warm."""
    summary, results = json.loads(summary_path.read_text()), json.loads(results_path.read_text())
    rows = [[which, f"{p['wall_s']:.1f} s", f"{p['score']:g}", "yes" if p["every_point"] else "no"]
            for which, p in summary["passes"].items()]  # fmt: skip
    moved = max(summary["ratios"], key=lambda r: abs(r["moved"] or 0), default=None)
    notes = (f"Largest move of a timed ratio, warm against cold: {summary['largest_ratio_move']:.1%}"
             + (f" (`{moved['benchmark']}`)." if moved else "."))  # fmt: skip
    return {"name": "solutions-cold-warm", "order": 20, "title": "`solutions/` graded with the caches cold, then warm",
            "about": "One `grade` of every assignment of `solutions/` on one GPU, side by side, with an empty "
                     "compilers' cache and then with what it left (`tools/warm_parity.py`). Re-measure: "
                     "`tools/measurements.py warm-parity comparison.json warm-parity/cold/results.json`.",
            "measured": provenance(results, driver), "columns": ["caches", "wall time", "points", "every point"],
            "rows": rows, "notes": notes}  # fmt: skip


def batch_parity(summary_path: Path, results_path: Path, driver: str | None, name: str) -> dict:
    """tools/batch_parity.py's comparison: a class graded one at a time, then with workers sharing a GPU."""
    summary, results = json.loads(summary_path.read_text()), json.loads(results_path.read_text())
    rows = [list(figure) for figure in _batch_figures(summary)]
    return {"name": name, "order": 30, "title": f"A class of 20 on one GPU ({name.removeprefix('class-of-20-')})",
            "about": "`tools/batch_parity.py`: the class of 20 graded by `batch` one submission at a time, then "
                     "with workers sharing the GPU; the no-gap bound is how long the shared pass would take with "
                     "no gap between its timed phases. Re-measure: `tools/measurements.py batch-parity "
                     f"comparison.json batch-parity/serial/<student>/results.json --name {name}`.",
            "measured": provenance(results, driver), "columns": ["figure", "value"], "rows": rows}  # fmt: skip


def nsight_profile(profile_path: Path, results_path: Path, driver: str | None) -> dict:
    """`.venv/bin/python -m grader profile`'s profile.json beside its results.json: each timed case's kernels
    as Nsight Compute's speed-of-light section saw them."""
    found, results = json.loads(profile_path.read_text()), json.loads(results_path.read_text())
    rows = []
    for case in found["cases"]:
        name = f"{case['part']} {case['case']}"
        if not case["kernels"]:
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", case["error"] or "no kernel recorded"])
        for k in case["kernels"]:  # read again from the figures, by today's rules
            read = KernelProfile(k["kernel"], k["duration_ns"], k["compute_pct"], k["memory_pct"], k["levels"])
            rows.append([name, k["kernel"].split("(")[0], f"{k['duration_ns'] / 1000:.1f} us", f"{k['compute_pct']:.0f}%",
                         f"{k['memory_pct']:.0f}%", f"{k['levels'].get('DRAM', 0):.0f}%", f"{k['levels'].get('L2', 0):.0f}%",
                         read.limit, read.reading])  # fmt: skip
    return {"name": "profile", "order": 40, "title": "`make profile`: Nsight Compute on the solutions' timed cases",
            "about": "`.venv/bin/python -m grader profile --submission solutions --assignment matmul --assignment softmax` on a "
                     "GPU: one call of each timed case under `ncu --section SpeedOfLight` (advice beside the grade, "
                     "never graded). compute and memory: the busiest unit of each as a share of its peak; DRAM and L2: "
                     "those levels' own. Re-measure: `tools/measurements.py profile results/profile.json "
                     "results/results.json`.",
            "measured": provenance(results, driver),
            "columns": ["case", "kernel", "time", "compute", "memory", "DRAM", "L2", "limit", "reading"], "rows": rows}  # fmt: skip


def corpus(results: Path, machine: str, driver: str | None, gpu_torch: str) -> dict:
    """tools/corpus_table.py's rows from both tiers' verdicts (`CORPUS_RESULTS=DIR` on each tier)."""
    sys.path.insert(0, str(REPO / "tools"))
    import corpus_table

    record = json.loads(record_path("corpus").read_text())  # its about and notes are prose kept with it
    record.update(columns=corpus_table.COLUMNS, rows=corpus_table.rows(results),
                  measured={"date": datetime.date.today().isoformat(), "machine": machine, "driver": _driver(driver),
                            "torch": f"{gpu_torch} (GPU), {_torch()} (CPU)", "triton": _pinned_triton(),
                            "commit": _commit()})  # fmt: skip
    return record


def steady_grade(summary_path: Path, results_path: Path, driver: str | None, note: str | None) -> dict:
    """tools/steady_grade.py's comparison: solutions/ graded alone again and again, then gradings at
    once on one GPU; each grading's points and its timed ratios' largest move from the alone median."""
    summary, results = json.loads(summary_path.read_text()), json.loads(results_path.read_text())
    rows = []
    for g in summary["gradings"]:
        move = g.get("largest_move") or {}
        moved = f"{move['move']:+.1%} ({move['benchmark']})" if move else "-"
        retaken = sum(len(reasons) for reasons in g.get("retaken", {}).values())
        rows.append([g["grading"], f"{g['score']:g}", "yes" if g["every_point"] else "no", f"{g['wall_s']:.1f} s", moved,
                     g.get("gated", "-"), retaken])  # fmt: skip
    busy = summary.get("busy")
    notes = (f"Together: {busy['cores']} of {busy['of']} cores spinning throughout. " if busy else "") + (note or "")
    return {"name": "steady-grade", "order": 25, "title": "The same GPU grade every time",
            "about": "`tools/steady_grade.py`: `solutions/` (every assignment) graded alone, one grading after "
                     "another (the first with every cache cold), then rounds of four gradings of gelu and softmax "
                     "at once, each a process of its own started by its own shell, with half the cores spinning. "
                     "Largest move: of any timed ratio, from its median over the gradings alone (the bar: 3% "
                     "alone, 5% together). Gated: timed calls behind the gate (grader/child/gate.py). Retaken: "
                     "rounds taken again. Re-measure: `tools/gpu_session.sh steady-alone-3 steady-together "
                     "steady-compare`, then `tools/measurements.py steady-grade steady.json "
                     "steady-grade/alone-1/results.json`.",
            "measured": provenance(results, driver),
            "columns": ["grading", "points", "every point", "wall time", "largest move", "gated", "retaken"],
            "rows": rows, "notes": notes}  # fmt: skip


def kept_transport(figures_path: Path, driver: str | None) -> dict:
    """tools/kept_transport.py's runs: a child's 2.5 GB of kept outputs through the channel's pipe
    and through the kept outputs' file, and the parent's load of them onto its GPU."""
    figures = json.loads(figures_path.read_text())
    rows = []
    for run in figures["results"]:
        parts = run.get("parts_s", {})
        rows.append([run["way"], f"{run['gb']:.2f} GB", f"{run['send_s']:.2f} s",
                     f"{run['ready_s']:.2f} s" if "ready_s" in run else "-",
                     f"{parts['copy']:.2f} s" if "copy" in parts else "-",
                     f"{run['fingerprint_s']:.2f} s" if "fingerprint_s" in run else "-",
                     f"{run['load_s']:.2f} s", "yes" if run.get("fingerprints_match") else "-"])  # fmt: skip
    return {"name": "kept-transport", "order": 23, "title": "A timing child's kept outputs, from the child to the parent",
            "about": "`tools/kept_transport.py`: a child process hands the parent 2.5 GB of GPU tensors (one "
                     "assignment's kept outputs), twice each way: `pipe`, the channel's signed frames "
                     "(grader/messages/frames.py, through pinned memory as the harness sends); `file`, the kept "
                     "outputs' memory file (grader/messages/kept_file.py), its pages made by the parent ahead, "
                     "mapped and registered with CUDA at the child's start; `file-staged`, the same file through "
                     "pinned memory of the child's own. After its last benchmark: what a timed phase after it "
                     "waits for (their fingerprints and the copy included). At its start: the mapping, while "
                     "the GPU is shared. Load: the parent's, onto its GPU, as judging reads them. Re-measure: "
                     "`tools/gpu_session.sh kept-transport`, then `tools/measurements.py kept-transport "
                     "kept-transport.json`.",
            "measured": figures_measured(figures, driver),
            "columns": ["way", "bytes", "after its last benchmark", "at its start", "the copy", "fingerprints",
                        "the parent's load", "fingerprints match"],
            "rows": rows}  # fmt: skip


def service_pages(figures_path: Path, condition: str, note: str | None) -> dict:
    """tests/test_service_load.py's figures (SERVICE_PAGES_JSON): pages of the service while a class
    uploads; one row per condition, replaced when measured again."""
    found = json.loads(figures_path.read_text())
    row = [condition, f"{found['students']} students, {found['submissions']} submissions in {found['sent_s']:.1f} s",
           found["pages"], f"{found['p50_s'] * 1e3:.0f} ms", f"{found['p99_s'] * 1e3:.0f} ms", f"{found['load']:.1f}"]  # fmt: skip
    record = with_row({
        "name": "service-pages", "order": 40, "title": "Pages of the submission service under load",
        "about": "tests/test_service_load.py's whole load on loopback (a class uploading at once to a real `serve`, "
                 "its grading a fake of 50 ms), two probing processes reading a student's page, the API's list, a "
                 "report and the leaderboard every 0.1 s meanwhile: the time each page took. The goal is 200 ms at "
                 "the 99th percentile; the test's own bar is five times that. Re-measure: `SERVICE_PAGES_JSON="
                 "pages.json .venv/bin/python -m pytest -m slow tests/test_service_load.py`, then "
                 "`tools/measurements.py service-pages pages.json --condition NAME`.",
        "columns": ["condition", "load sent", "pages", "p50", "p99", "load average"], "rows": []}, row)  # fmt: skip
    record["measured"] = {"date": datetime.date.today().isoformat(), "machine": f"{os.cpu_count()}-core CPU machine",
                          "driver": "-", "torch": _torch(), "triton": _pinned_triton(), "commit": _commit()}  # fmt: skip
    if note:
        record["notes"] = note
    return record


def clock_ramp(figures_path: Path, driver: str | None) -> dict:
    """tools/clock_ramp.py's figures: how an idle GPU comes up to speed, and what the settle did."""
    figures = json.loads(figures_path.read_text())
    rows = []
    for idle, found in figures["idle"].items():
        first = [f"{ms:.3f}" for _, ms in found["batches"][:3]]
        rows.append([f"{float(idle):g} s", " / ".join(first), f"{found['batch_ms']:.3f} ms",
                     f"{found['settle_s'] * 1e3:.0f} ms",
                     f"{found['after_settle_ms']:.3f} ms ({found['after_vs_settled']:+.1%})"])  # fmt: skip
    return {"name": "clock-ramp", "order": 21, "title": "How long an idle GPU takes to come up to speed",
            "about": "`tools/clock_ramp.py`: the GPU busy for a second, then idle for the time shown, then given the "
                     "timing child's settle work (grader/child/timing.py `settle`: reads of the L2 flush buffer and "
                     "waits counted in the GPU's clock cycles) in batches timed with CUDA events: the first three "
                     "batches, and the speed the GPU settled at (the median of the last tenth of 0.4 s of batches). "
                     "Then the same idle again, followed by the settle itself: how long it took (at least 50 ms, "
                     "until a window of batches is no faster than the one before, at most 250 ms), and the batches "
                     "right after it. Re-measure: `tools/gpu_session.sh clock-ramp`, then `tools/measurements.py "
                     "clock-ramp clock-ramp.json`.",
            "measured": figures_measured(figures, driver),
            "columns": ["idle", "first batches (ms)", "at speed", "the settle took", "batches after it"],
            "rows": rows}  # fmt: skip


PHASES = ("precompile", "correctness", "timing", "shown", "waiting", "judging", "sizing", "caches")


def phases_of(line: str) -> dict[str, tuple[dict[str, float], str]]:
    """A grading's phases line (its environment's `phases`, grader/running/tasks.py's Phases.line):
    per assignment, each phase's seconds and the notes in parentheses after them (which may hold
    parentheses and semicolons of their own)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(line):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and line.startswith("; ", i):
            parts.append(line[start:i])
            start = i + 2
    parts.append(line[start:])
    found = {}
    for part in filter(None, (p.strip() for p in parts)):
        name, _, rest = part.partition(": ")
        figures, _, notes = rest.partition(" (")
        seconds = {m[1]: float(m[2]) for m in re.finditer(r"(\w+) ([\d.]+) s", figures)}
        found[name] = (seconds, notes[:-1] if notes.endswith(")") else notes)
    return found


def phases(gradings: list[str], driver: str | None, note: str | None = None) -> dict:
    """Each grading's phases per assignment, from LABEL=results.json pairs (tools/steady_grade.py's
    folders, whose wall.json gives the grading's wall time; gpu_session.sh's cold-NAME)."""
    rows, first = [], None
    for given in gradings:
        label, _, path = str(given).partition("=")
        results = json.loads(Path(path).read_text())
        first = first or results
        walls = [Path(path).with_suffix(".wall.json"), Path(path).with_name("wall.json")]  # cold-NAME's, steady_grade's
        wall = next((w for w in walls if w.exists()), None)
        seconds = f"{json.loads(wall.read_text())['seconds']:.1f} s" if wall else "-"
        for name, (figures, notes) in phases_of(results.get("extra_data", {}).get("phases", "")).items():
            said = notes.split("; ")
            precompiled = next((n for n in said if n.startswith(("precompiled", "foresaw"))), "-")
            built = next((n.removeprefix("launchers built: ") for n in said if n.startswith("launchers built: ")), "-")
            rows.append([label, seconds, name, *(f"{figures.get(p, 0.0):.1f} s" for p in PHASES), built, precompiled])
            seconds = ""
    return {"name": "grading-phases", "order": 22, "title": "Where a GPU grading's time goes, phase by phase",
            "about": "Each grading's phases per assignment, from its results.json (`phases`): the precompile pass "
                     "(grader/running/precompile.py: every kernel the grading will launch compiled in parallel "
                     "before its correctness child runs), the correctness child (compiling what the pass missed, "
                     "autotuning, the cases), the timing child, the shown baselines' own child (timed once per machine: "
                     "grader/running/shown_figures.py), the wait for the GPU's lock, and the grading "
                     "process's own work: judging (the verdicts, float64 references included), sizing (each "
                     "case's output size, where none was kept) and caches (the kept compilers' cache restored "
                     "and kept); the launchers Triton built (gcc) in each phase. Wall time is the "
                     "whole grading's. Re-measure: `tools/gpu_session.sh steady-alone-1 steady-alone-1-2 "
                     "cold-flash_attention`, then `tools/measurements.py phases cold=alone-1/results.json "
                     "warm=alone-2/results.json flash_attention-cold=cold-flash_attention.json`.",
            "measured": provenance(first or {}, driver),
            "columns": ["grading", "wall time", "assignment", *PHASES, "launchers built", "precompile pass"],
            "rows": rows, **({"notes": note} if note else {})}  # fmt: skip


def cpu_tier(gradings: list[str], note: str | None = None) -> dict:
    """tools/cpu_tier.py's gradings: LABEL=results.json pairs, each with its wall.json and began.json
    beside it; per assignment, the seconds of all its phases."""
    rows, first, names = [], None, []
    for given in gradings:
        label, _, path = str(given).partition("=")
        results = json.loads(Path(path).read_text())
        first = first or results
        wall = json.loads(Path(path).with_name("wall.json").read_text())
        began = json.loads(Path(path).with_name("began.json").read_text())
        found = phases_of(results.get("extra_data", {}).get("phases", ""))
        names = names or sorted(found)
        rows.append([label, f"{wall['seconds']:.1f} s", f"{results['score']:g}",
                     *(f"{sum(found[n][0].values()):.1f} s" if n in found else "-" for n in names),
                     f"{began['load']:.1f}"])  # fmt: skip
    measured = provenance(first or {}, "-")
    measured["machine"] = f"{os.cpu_count()}-core CPU machine (no GPU)"
    return {"name": "cpu-tier", "order": 24, "title": "`solutions/` on the CPU tier, against an earlier grader",
            "about": "`solutions/`, every assignment, graded cold on the CPU tier (`grade --device cpu`, an empty "
                     "HOME and cache each time) by each commit's own tree, the two commits alternately "
                     "(`tools/cpu_tier.py`). Seconds per assignment are the sum of its phases (results.json's "
                     "`phases`); the load average when the grading began in the last column. Re-measure: "
                     "`tools/cpu_tier.py --against COMMIT`, then `tools/measurements.py cpu-tier "
                     "LABEL=cpu-tier/LABEL-1/results.json ...`.",
            "measured": measured, "columns": ["grading", "wall time", "points", *names, "load"], "rows": rows,
            **({"notes": note} if note else {})}  # fmt: skip


def class_grade(figures_path: Path, results_path: Path | None, driver: str | None, note: str | None = None) -> dict:
    """tools/class_grade.py's summary: a class of full submissions graded on one GPU. The machine is
    the one its grades name, or a results.json's where the summary is older than that."""
    found = json.loads(figures_path.read_text())
    results = json.loads(results_path.read_text()) if results_path else {"extra_data": found.get("environment", {})}
    used, asked = found.get("workers_used", found["workers"]), found["workers"]
    rows = [["students graded", f"{found['students']} of {found['of']} ({found['grades']} grades)"],
            ["workers sharing the GPU", used if used == asked else f"{used} ({asked} asked: the GPU's memory fits {used})"],
            ["wall time", f"{found['wall_s']:.1f} s ({found['calls']} run{'s' if found['calls'] > 1 else ''} of the batch)"],
            ["timed phases, summed", f"{found['timed_s']:.1f} s"],
            ["grades short of every point", len(found["lost"])]]  # fmt: skip
    return {"name": "class-of-20-full", "order": 31, "title": "A class of full submissions on one GPU",
            "about": "`tools/class_grade.py`: copies of `solutions/` (every assignment, each student's files a "
                     "comment apart, so each compiles from cold) graded by `batch --device cuda --workers 6`: in one "
                     "run that outlives each device command (`class-bg-20`), or in several runs, each stopped at a "
                     "command's end (`class-20`), whose wall times are summed. Re-measure: "
                     "`tools/gpu_session.sh class-bg-20` until it says done, then `tools/measurements.py class-grade "
                     "class.json`.",
            "measured": provenance(results, driver), "columns": ["figure", "value"], "rows": rows,
            **({"notes": note} if note else {})}  # fmt: skip


def service_load(figures_path: Path, results_path: Path, driver: str | None, note: str | None) -> dict:
    """tools/service_load.py's figures: a class submitting at once through a real `serve` on one GPU,
    each student's wait and grading, and the grades of the first few graded alone as well."""
    found, results = json.loads(figures_path.read_text()), json.loads(results_path.read_text())

    def shown(value: float | None, unit: str = "") -> str:
        return "-" if value is None else f"{value:.1f}{unit}" if unit else f"{value:g}"

    rows = [[r["student"], r["state"], shown(r["wait_s"], " s"), shown(r["grading_s"], " s"), shown(r["points"]),
             shown(r["full_points"]), shown(r["alone"])] for r in found["rows"]]  # fmt: skip
    waits = [r["wait_s"] for r in found["rows"] if r["wait_s"] is not None]
    summary = (f"{found['students']} students submitted {found['assignment']} at once to `serve --workers "
               f"{found['workers']}`: {found['wall_s']:.1f} s from the first upload to the last grade; the longest "
               f"wait in the queue {max(waits):.1f} s.") if waits else ""  # fmt: skip
    return {"name": "service-load", "order": 41, "title": "A class through the submission service on one GPU",
            "about": "`tools/service_load.py --device cuda`: every student uploads the solution of one assignment "
                     "(each a comment apart, so each is graded from cold) to a real `serve` on the GPU node at "
                     "once; wait is from upload to the start of its grading, grading to its grade; full is the "
                     "points due to the solution; alone is the same folder graded by `grade` afterwards. "
                     "Re-measure: `tools/gpu_session.sh service-load`, then `tools/measurements.py service-load "
                     "service-load/service-load.json service-load/alone.json`.",
            "measured": provenance(results, driver),
            "columns": ["student", "state", "wait", "grading", "points", "full", "alone"],
            "rows": rows, "notes": " ".join(filter(None, (summary, note)))}  # fmt: skip


def _torch() -> str:
    import torch

    return torch.__version__


def _pinned_triton() -> str:
    import triton

    return triton.__version__


def _batch_figures(summary: dict) -> list[tuple[str, str]]:
    walls = summary["walls"]
    serial, shared = walls["serial"]["seconds"], walls["shared"]["seconds"]
    figures = [("one at a time", f"{serial:.1f} s"),
               (f"{walls['shared']['workers']} workers sharing the GPU", f"{shared:.1f} s ({summary['speedup']:.2f}x)"),
               ("grades.csv", "the same" if summary["same_grades_csv"] else "differs"),
               ("largest move of a timed ratio", f"{summary['largest_ratio_move']:.1%}")]  # fmt: skip
    if bound := summary.get("no_gap_bound"):
        figures.append(("no-gap bound", f"{bound['seconds']:.1f} s ({serial / bound['seconds']:.2f}x)"))
    return figures


def report_speed(bench_path: Path) -> dict:
    """pytest-benchmark's JSON of tests/bench_report.py: how long each report takes to make."""
    bench = json.loads(bench_path.read_text())
    info = bench.get("machine_info", {})
    rows = [[b["name"], f"{b['stats']['median'] * 1000:.1f} ms", f"{b['stats']['min'] * 1000:.1f} ms", b["stats"]["rounds"]]
            for b in bench["benchmarks"]]  # fmt: skip
    measured = {"date": bench.get("datetime", "")[:10], "machine": f"{info.get('cpu', {}).get('brand_raw', '-')}",
                "driver": "-", "torch": "-", "triton": "-", "commit": bench.get("commit_info", {}).get("id", "-")[:7]}
    return {"name": "report-speed", "order": 50, "title": "How long the reports take to make",
            "about": "`tests/bench_report.py` (pytest-benchmark): the HTML report and the terminal table of a GPU "
                     "grade of every part of every assignment. A speed goal, not a test: `make test` holds no "
                     "timer. Re-measure: `.venv/bin/python -m pytest tests/bench_report.py --benchmark-json="
                     "bench-report.json`, then `tools/measurements.py report-speed bench-report.json`.",
            "measured": measured, "columns": ["benchmark", "median", "fastest", "rounds"], "rows": rows}  # fmt: skip


# The suite's table: one row per condition, each with its own provenance; a re-measure replaces its row.
SUITE_COLUMNS = ["condition", *PROVENANCE[:2], "commit", "set-up", "make test", "in all", "passed", "skipped",
                 "failed or errors"]  # fmt: skip


def without_bwrap(folder: Path) -> str:
    """A PATH whose every folder's commands are linked into `folder`, all but bwrap: what the grader's
    sandbox looks up (shutil.which) then finds nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        for entry in Path(directory).glob("*") if Path(directory).is_dir() else []:
            target = folder / entry.name
            if entry.name != "bwrap" and not target.exists() and os.access(entry, os.X_OK):
                target.symlink_to(entry)
    return str(folder)


def suite(condition: str, busy: bool, hide_bwrap: bool, home: Path | None = None) -> list:
    """A fresh clone's set-up and `make test`, timed; the row of `condition`. HOME is an empty folder
    (every cache cold), or `home` where given: a HOME an earlier run warmed, to see what caches save."""
    scratch = Path(tempfile.mkdtemp(prefix="suite-"))
    clone, home = scratch / "clone", home or scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {**os.environ, "HOME": str(home), "PYTEST_ADDOPTS": "--durations=40"}  # the slowest, as CI lists them
    env.pop("XDG_CACHE_HOME", None)
    if hide_bwrap:
        env["PATH"] = without_bwrap(scratch / "bin")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)] if busy else []
    try:
        started = time.monotonic()
        subprocess.run(["make", ".venv/.ready"], cwd=clone, env=env, check=True, capture_output=True)
        setup = time.monotonic() - started
        done = subprocess.run(["make", "test"], cwd=clone, env=env, capture_output=True, text=True)
        tested = time.monotonic() - started - setup
    finally:
        for spinner in spinners:
            spinner.kill()
    (scratch / "make-test.log").write_text(done.stdout + done.stderr)
    summary = next((line for line in reversed(done.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", line)), "")
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|skipped|failed|errors?)", summary)}
    failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
    row = [condition, datetime.date.today().isoformat(), f"{_cpu()}, {os.cpu_count()} cores",
           _commit(), f"{setup:.0f} s", f"{tested:.0f} s", f"{(setup + tested) / 60:.1f} min", counts.get("passed", 0),
           counts.get("skipped", 0), failed]  # fmt: skip
    print(f"{condition}: set-up {setup:.0f} s, make test {tested:.0f} s (exit {done.returncode}); log in {scratch}")
    return row


def _cpu() -> str:
    """The processor's model name, as /proc/cpuinfo gives it (the machine's own name says nothing)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "-"


def suite_record(row: list) -> dict:
    return with_row({
        "name": "test-suite", "order": 1, "title": "`make test` from a fresh clone on the 2-core machine",
        "about": "A fresh clone of the commit, HOME an empty folder (every cache cold: the grader's, Triton's, "
                 "pip's, torch's), the set-up (`make .venv/.ready`) and then `make test`, each timed; `busy`: "
                 "every core kept busy by a spinning process the whole time; `without bubblewrap`: bwrap hidden "
                 "from the PATH, so the grader runs unsandboxed. Re-measure: `tools/measurements.py suite "
                 "--condition NAME [--busy] [--without-bwrap]`.",
        "columns": SUITE_COLUMNS, "rows": []}, row)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("render", "check", "solutions-speed", "warm-parity", "batch-parity",
                                         "report-speed", "suite", "profile", "corpus", "steady-grade", "phases", "cpu-tier", "service-pages",
                                         "class-grade", "service-load", "kept-transport", "clock-ramp"))  # fmt: skip
    parser.add_argument("inputs", nargs="*", type=Path)
    parser.add_argument("--driver", help="the GPU driver's version, where nvidia-smi is not at hand")
    parser.add_argument("--name", default="class-of-20-vector_add", help="batch-parity: the table's name")
    parser.add_argument("--condition", help="suite, service-pages: the row's name (idle, busy, ...)")
    parser.add_argument("--busy", action="store_true", help="suite: keep every core busy meanwhile")
    parser.add_argument("--without-bwrap", action="store_true", help="suite: hide bubblewrap from the PATH")
    parser.add_argument("--machine", help="corpus: the GPU (and CPU) the verdicts were measured on")
    parser.add_argument("--gpu-torch", help="corpus: the GPU tier's torch (its verdict files carry no versions)")
    parser.add_argument("--commit", help="the commit measured, where it is not HEAD")
    parser.add_argument("--note", help="steady-grade, phases, cpu-tier, service-pages, service-load: what the table does not show (a run cut short, an earlier figure)")
    parser.add_argument("--home", type=Path, help="suite: this HOME instead of an empty one (caches kept between runs)")
    args = parser.parse_args()
    if args.what == "check":
        same = PAGE.exists() and PAGE.read_text() == render(load_records())
        print("docs/measurements.md is what the records render" if same else "docs/measurements.md differs: render it")
        return 0 if same else 1
    makers = {
        "render": lambda: None,
        "solutions-speed": lambda: solutions_speed(args.inputs[0], args.driver),
        "warm-parity": lambda: warm_parity(args.inputs[0], args.inputs[1], args.driver),
        "batch-parity": lambda: batch_parity(args.inputs[0], args.inputs[1], args.driver, args.name),
        "report-speed": lambda: report_speed(args.inputs[0]),
        "profile": lambda: nsight_profile(args.inputs[0], args.inputs[1], args.driver),
        "corpus": lambda: corpus(args.inputs[0], args.machine or "-", args.driver, args.gpu_torch or "-"),
        "steady-grade": lambda: steady_grade(args.inputs[0], args.inputs[1], args.driver, args.note),
        "class-grade": lambda: class_grade(args.inputs[0], args.inputs[1] if len(args.inputs) > 1 else None, args.driver,
                                           args.note),
        "phases": lambda: phases([str(i) for i in args.inputs], args.driver, args.note),
        "cpu-tier": lambda: cpu_tier([str(i) for i in args.inputs], args.note),
        "service-pages": lambda: service_pages(args.inputs[0], args.condition or "idle", args.note),
        "service-load": lambda: service_load(args.inputs[0], args.inputs[1], args.driver, args.note),
        "kept-transport": lambda: kept_transport(args.inputs[0], args.driver),
        "clock-ramp": lambda: clock_ramp(args.inputs[0], args.driver),
        "suite": lambda: suite_record(suite(args.condition or "idle", args.busy, args.without_bwrap, args.home)),
    }
    record = makers[args.what]()
    if record is None:
        PAGE.write_text(render(load_records()))
    else:
        if args.commit:
            record["measured"]["commit"] = args.commit
        write_record(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
