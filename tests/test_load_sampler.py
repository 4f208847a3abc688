"""tools/load_sampler.py: what the cores and the GPU did while a grade ran, recorded and read back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import load_sampler  # noqa: E402


def test_a_grades_processes_are_told_apart():
    assert load_sampler._kind("/usr/bin/python3 -m grader grade --submission s", 0) == "command"
    assert load_sampler._kind("python -c from multiprocessing.spawn import spawn_main", 0) == "worker"
    assert load_sampler._kind("/venv/bin/python -I -c BOOT /repo 7 torch", 10) == "child nice"
    assert load_sampler._kind("/venv/bin/python -I -c BOOT /repo 7 torch", 0) == "child"
    assert load_sampler._kind("bwrap --unshare-all", 0) == "bwrap"
    assert load_sampler._kind("/usr/local/cuda/bin/ptxas -arch=sm_90", 10) == "compiler"


def test_samples_are_summed_per_bin_from_the_grades_start(tmp_path):
    began = 1000.0
    lines = [{"cores": 16, "gpu": True, "interval": 0.1},
             {"t": 999.9, "busy": 16, "running": 40, "gpu": 0, "procs": [[1, "worker", 0, 9, 5.0]]},  # before: left out
             {"t": 1000.2, "busy": 4, "running": 6, "gpu": 10, "procs": [[2, "child", 0, 3, 0.1], [3, "worker", 0, 9, 0.05]]},
             {"t": 1000.7, "busy": 8, "running": 20, "gpu": 30, "procs": [[2, "child", 0, 3, 0.1]]},
             {"t": 1001.5, "busy": 1, "running": 2, "gpu": None, "procs": []}]  # fmt: skip
    path = tmp_path / "load.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows = load_sampler.read(path, began, 1.0)
    assert [r["from_s"] for r in rows] == [0.0, 1.0]
    assert rows[0]["busy_cores"] == 6.0 and rows[0]["most_ready"] == 20 and rows[0]["gpu_pct"] == 20
    assert rows[0]["cpu_s"] == {"child": 0.2, "worker": 0.05}
    assert rows[1]["gpu_pct"] is None and rows[1]["cpu_s"] == {}


def test_recording_runs_until_told_to_stop(tmp_path):
    out = tmp_path / "load.jsonl"
    process = subprocess.Popen([sys.executable, str(REPO / "tools" / "load_sampler.py"), "record", "--out", str(out),
                                "--interval", "0.05"])  # fmt: skip
    deadline = time.monotonic() + 60
    while (not out.exists() or len(out.read_text().splitlines()) < 4) and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    header, *samples = [json.loads(line) for line in out.read_text().splitlines()]
    assert header["cores"] >= 1 and len(samples) >= 3
    assert all(0 <= s["busy"] <= header["cores"] + 0.5 and s["running"] >= 1 for s in samples)
