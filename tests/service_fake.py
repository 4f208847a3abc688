#!/usr/bin/env python3
"""NOT THE GRADER: `serve` with a fake grading in place of the real one, for the load test of the
service (test_service_load.py) alone. It measures the service (queue, dispatcher, pages) with
gradings of a fixed 50 ms that record what they were handed; every other test of the service
grades for real. `service_fake.py serve --course C --out D --port P [--no-sandbox]`, as `serve`."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

from rich.console import Console

from grader.reporting.results import TestResult

FAKE_S = 0.05
LOG = "SERVICE_FAKE_LOG"  # where each fake grading writes a line: the test reads who was graded, once, in order


def fake_grade(assignment, folder: str, device: str, salt: str, student: str, sandboxed: bool):
    """What batch.grade_task returns, made up: one passing case, after FAKE_S."""
    mark = (Path(folder) / assignment.name / "mark.txt").read_text().strip()
    time.sleep(FAKE_S)
    with open(os.environ[LOG], "a") as log:
        log.write(json.dumps({"student": student, "mark": mark, "at": time.time()}) + "\n")
    part = assignment.parts[0]
    tests = [TestResult(assignment.name, part.name, "correctness", f"{assignment.name}/{part.name}: a FAKE case", "ok",
                        1.0, 1.0, "FAKE grading: the service's load test")]  # fmt: skip
    environment = {"device": device, "tier": "FAKE: the service's load test", "grader_version": "fake"}
    return tests, environment, FAKE_S, f"{socket.gethostname()}:{os.getpid()}"


if __name__ == "__main__":
    from grader.service import server

    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    for flag in ("--course", "--out"):
        parser.add_argument(flag, type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-sandbox", action="store_true")
    args = parser.parse_args()
    status = server.serve(args.course.resolve(), args.out.resolve(), "127.0.0.1", args.port, None, None,
                          not args.no_sandbox, Console(), task=fake_grade)  # fmt: skip
    sys.stdout.flush()
    os._exit(status)
