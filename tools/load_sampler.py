"""What the machine's cores and GPU were doing while a grade ran: sampled, then read by the second.

    python tools/load_sampler.py record --out load.jsonl [--interval 0.1]   # until SIGTERM or SIGINT
    python tools/load_sampler.py read load.jsonl --began steady-grade/alone-2/began.json [--bin 1.0]

`record` writes one line per sample: the epoch time, the cores busy since the last sample
(/proc/stat), the threads ready to run (procs_running), the GPU's busy share over the driver's
last period (NVML's utilization rate, where libnvidia-ml loads), and each process that used the
CPU since the last sample: its pid, nice value, threads, CPU seconds and what it is (`_kind`).
`read` sums them in bins from the grade's start (began.json's epoch, as tools/hold_timeline.py
counts): is a grade's start short of cores (busy near the machine's count, more threads ready
than cores), of the GPU, or of neither (waiting on something else)?
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _kind(cmdline: str, nice: int) -> str:
    """What a process of a grade is, from its command line and nice value."""
    if "-m grader grade" in cmdline or cmdline.endswith("grader grade"):
        return "command"
    if "multiprocessing" in cmdline:
        return "worker"  # a side-by-side worker (overlap.py) or a pool's helper
    if "-I -c" in cmdline:  # a child (isolation.spawn's interpreter)
        return "child nice" if nice > 0 else "child"
    if "bwrap" in cmdline:
        return "bwrap"
    if "ptxas" in cmdline or "gcc" in cmdline or "cc1" in cmdline:
        return "compiler"
    return "other"


class _Gpu:
    """NVML's utilization rate of GPU 0, or None where it does not load."""

    class _Rates(ctypes.Structure):
        _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

    def __init__(self):
        self.handle = None
        try:
            self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            if self.nvml.nvmlInit_v2() == 0 and self.nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0:
                self.handle = handle
        except OSError:
            pass

    def rate(self) -> int | None:
        if self.handle is None:
            return None
        rates = self._Rates()
        return rates.gpu if self.nvml.nvmlDeviceGetUtilizationRates(self.handle, ctypes.byref(rates)) == 0 else None


def _cpu() -> tuple[int, int, int]:
    """(busy ticks, all ticks, threads ready to run) from /proc/stat."""
    busy = total = running = 0
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            total, busy = sum(fields[:8]), sum(fields[:8]) - fields[3] - fields[4]  # idle, iowait
        elif line.startswith("procs_running"):
            running = int(line.split()[1])
    return busy, total, running


def _processes() -> dict[int, tuple[int, int, int]]:
    """Each process's (CPU ticks, nice, threads)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[11]) + int(fields[12]), int(fields[16]), int(fields[17]))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
    except OSError:
        return ""


def record(out: Path, interval: float) -> None:
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    gpu, cores = _Gpu(), os.cpu_count() or 1
    named: dict[int, str] = {}
    last_cpu, last = _cpu(), _processes()
    with open(out, "w") as file:
        file.write(json.dumps({"cores": cores, "gpu": gpu.handle is not None, "interval": interval}) + "\n")
        while not stop:
            time.sleep(interval)
            now_cpu, now, t = _cpu(), _processes(), time.time()
            spent = max(1, now_cpu[1] - last_cpu[1])
            procs = []
            for pid, (ticks, nice, threads) in now.items():
                used = ticks - last.get(pid, (ticks,))[0]
                if used <= 0:
                    continue
                if pid not in named:
                    named[pid] = _kind(_cmdline(pid), nice)
                procs.append([pid, named[pid], nice, threads, round(used / TICK, 3)])
            file.write(json.dumps({"t": round(t, 3), "busy": round(cores * (now_cpu[0] - last_cpu[0]) / spent, 2),
                                   "running": now_cpu[2], "gpu": gpu.rate(), "procs": procs}) + "\n")  # fmt: skip
            file.flush()
            last_cpu, last = now_cpu, now


def read(path: Path, began: float, width: float) -> list[dict]:
    """Per bin of `width` seconds from `began`: the cores busy, the most threads ready, the GPU's
    mean busy share, and the CPU seconds each kind of process used."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    bins: dict[int, dict] = defaultdict(lambda: {"busy": [], "running": [], "gpu": [], "kinds": defaultdict(float)})
    for sample in lines[1:]:
        at = sample["t"] - began
        if at < 0:
            continue
        found = bins[int(at // width)]
        found["busy"].append(sample["busy"])
        found["running"].append(sample["running"])
        if sample["gpu"] is not None:
            found["gpu"].append(sample["gpu"])
        for _, kind, _, _, used in sample["procs"]:
            found["kinds"][kind] += used
    rows = []
    for index in sorted(bins):
        found = bins[index]
        rows.append({"from_s": round(index * width, 2), "busy_cores": round(sum(found["busy"]) / len(found["busy"]), 1),
                     "most_ready": max(found["running"]), "gpu_pct": round(sum(found["gpu"]) / len(found["gpu"])) if found["gpu"] else None,
                     "cpu_s": {k: round(v, 2) for k, v in sorted(found["kinds"].items(), key=lambda kv: -kv[1])}})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--interval", type=float, default=0.1)
    rd = commands.add_parser("read")
    rd.add_argument("samples", type=Path)
    rd.add_argument("--began", type=Path, required=True, help="a grading's began.json (tools/steady_grade.py)")
    rd.add_argument("--bin", type=float, default=1.0)
    rd.add_argument("--until", type=float, default=60.0, help="seconds from the start to show")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.interval)
        return 0
    began = json.loads(args.began.read_text())["epoch"]
    cores = json.loads(args.samples.read_text().splitlines()[0])["cores"]
    print(f"{cores} cores; per {args.bin:g} s from the grade's start: cores busy, most threads ready, GPU busy %, "
          "CPU seconds by kind")  # fmt: skip
    for row in read(args.samples, began, args.bin):
        if row["from_s"] > args.until:
            break
        kinds = ", ".join(f"{k} {v:.1f}" for k, v in row["cpu_s"].items() if v >= 0.05)
        print(f"{row['from_s']:6.1f}  {row['busy_cores']:5.1f}  {row['most_ready']:3d}  {str(row['gpu_pct']):>4}  {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
