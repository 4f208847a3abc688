"""tools/service_load.py rehearsed on the CPU tier, as the GPU session runs it on a GPU: two students
through a real `serve`, the first graded alone too. --out receives the figures and that grading's
results.json alone (the device hands back few files), from which tools/measurements.py makes the
table; the class and the service's gradebook stay under --work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grader.assignment.spec import REPO_ROOT
from grader.running import sandbox

sys.path.insert(0, str(REPO_ROOT / "tools"))
import measurements  # noqa: E402

pytestmark = pytest.mark.slow  # a real service and three real gradings: `make test-slow`


def test_two_students_graded_in_full_and_the_first_alone_as_the_service_graded_them(tmp_path):
    if sandbox.probe().startswith("none"):
        pytest.skip("the tool's `serve` grades in the sandbox, and bubblewrap does not work here")
    out, work = tmp_path / "out", tmp_path / "work"
    argv = [sys.executable, "tools/service_load.py", "--device", "cpu", "--students", "2", "--alone", "1",
            "--assignment", "vector_add", "--out", str(out), "--work", str(work)]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["alone.json", "serve.log", "service-load.json", "service-load.txt"]
    assert (work / "served" / "gradebook.sqlite").is_file() and (work / "class" / "student01").is_dir()
    figures = json.loads((out / "service-load.json").read_text())
    assert (figures["workers"], figures["alone"]) == (2, 1)
    rows = {row["student"]: row for row in figures["rows"]}
    assert sorted(rows) == ["student00", "student01"]
    for row in rows.values():
        assert row["state"] == "graded" and row["points"] == row["full_points"] > 0, row
        assert row["max_points"] >= row["full_points"], "on the CPU tier speed is not graded: max holds it"
    assert [name for name, row in rows.items() if row["alone"] is not None] == ["student00"]
    assert rows["student00"]["alone"] == rows["student00"]["points"]
    table = (out / "service-load.txt").read_text().splitlines()
    assert next(line for line in table if line.startswith("student01")).split()[-1] == "-", "not graded alone"
    alone = json.loads((out / "alone.json").read_text())
    assert alone["score"] == rows["student00"]["alone"], "alone.json is the first student's grading alone"
    record = measurements.service_load(out / "service-load.json", out / "alone.json", "-", None)
    assert record["measured"]["torch"] == alone["extra_data"]["torch_version"]
    assert [row[0] for row in record["rows"]] == [r["student"] for r in figures["rows"]]
    alone_column = {row[0]: row[-1] for row in record["rows"]}
    assert alone_column == {"student00": f"{rows['student00']['alone']:g}", "student01": "-"}
    assert "2 students submitted vector_add" in record["notes"]
