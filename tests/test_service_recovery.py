"""The service's queue survives its processes: the server killed with `kill -9` mid-queue and started
again grades every accepted submission once (none lost, none doubled), and a Dask worker killed
mid-grading has its submission graded again, once. Real processes, real grading, real SIGKILL."""

from __future__ import annotations

import sqlite3

import psutil  # comes with dask's distributed, which the service needs anyway

from service_run import Server, solution_zip, token, wait_for, write_course

CHILD = "grader.child.main"  # what a grading's child process runs (grader/running/isolation.py)


def rows(out) -> dict[str, tuple]:
    """id -> (state, attempts, finished_at, graded_by), read as another process would."""
    with sqlite3.connect(f"file:{out / 'gradebook.sqlite'}?mode=ro", uri=True, timeout=30) as db:
        found = db.execute("SELECT id, state, attempts, finished_at, graded_by FROM submissions").fetchall()
    return {row[0]: row[1:] for row in found}


def grades(out) -> list[tuple]:
    with sqlite3.connect(f"file:{out / 'gradebook.sqlite'}?mode=ro", uri=True, timeout=30) as db:
        return db.execute("SELECT student, submission_hash, score FROM grades").fetchall()


def all_graded(out, ids) -> bool:
    found = rows(out)
    return all(found[id][0] in ("graded", "failed") for id in ids)


def test_the_server_killed_mid_queue_loses_and_doubles_nothing(tmp_path):
    students = ["ann", "ben", "cy"]
    course = write_course(tmp_path / "course", students)
    server = Server(course, tmp_path / "out").start()
    ids = [server.upload(token(s), solution_zip("vector_add", f"{s} {n}"))[2][0]["id"] for n in (1, 2) for s in students]
    mid_queue = lambda: {"graded", "grading", "queued"} <= {state for state, *_ in rows(server.out).values()}  # noqa: E731
    wait_for(mid_queue, "one graded, one grading, one queued", progress=lambda: rows(server.out))
    processes = psutil.Process(server.process.pid).children(recursive=True)
    server.kill9()
    _, alive = psutil.wait_procs(processes, timeout=120)
    assert not alive, f"outlived the server: {[p.info if hasattr(p, 'info') else p.pid for p in alive]}"
    # What the killed server left, read once it is dead: read before the kill, a queued submission
    # could start its grading in between, and count as graded twice (seen on a busy machine).
    before = rows(server.out)
    assert {"graded", "queued"} <= {state for state, *_ in before.values()}, before
    again = Server(course, server.out).start()
    try:
        wait_for(lambda: all_graded(again.out, ids), "every submission graded", progress=lambda: rows(again.out))
    finally:
        again.stop()
    after = rows(again.out)
    assert {after[id][0] for id in ids} == {"graded"}
    for id, (state, attempts, finished, by) in before.items():
        if state == "graded":  # graded before the kill: kept, not graded again
            assert after[id] == (state, attempts, finished, by)
        else:  # interrupted grading (attempt 1) or never started: graded once more, once
            assert after[id][1] == attempts + 1 == (2 if state == "grading" else 1), (id, state, after[id])
    assert sorted(score for *_, score in grades(again.out)) == [4.0] * len(ids), "one grade per submission"
    assert "were being graded when the server last stopped: queued again" in again.log.read_text()


def test_a_worker_killed_mid_grading_has_its_submission_graded_again_once(tmp_path):
    server = Server(write_course(tmp_path / "course", ["dee"]), tmp_path / "out").start()
    try:
        [row] = server.upload(token("dee"), solution_zip("vector_add", "dee"))[2]

        def worker_grading():
            """The server's child process (a Dask worker) under which a grading's child runs."""
            for worker in psutil.Process(server.process.pid).children():
                try:
                    if any(CHILD in " ".join(p.cmdline()) for p in worker.children(recursive=True)):
                        return worker
                except psutil.Error:
                    continue
            return None

        worker = wait_for(worker_grading, "a grading under way", progress=lambda: rows(server.out))
        assert rows(server.out)[row["id"]][0] == "grading"
        worker.kill()
        wait_for(lambda: all_graded(server.out, [row["id"]]), "graded after the kill", progress=lambda: rows(server.out))
    finally:
        server.stop()
    state, attempts, _, graded_by = rows(server.out)[row["id"]]
    assert state == "graded" and attempts == 1, "Dask handed the task to a new worker: one dispatch"
    assert graded_by and int(graded_by.rsplit(":", 1)[1]) != worker.pid, "another worker process graded it"
    assert [score for *_, score in grades(server.out)] == [4.0], "graded again, recorded once"
