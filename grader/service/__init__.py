"""The submission service: students without a GPU get their GPU grade from the course's GPUs.

`python -m grader serve` is an ASGI app (FastAPI on uvicorn) over a batch's gradebook: uploads go
through the batch's intake, wait as rows of the gradebook (the queue survives `kill -9`), and are
graded by the batch's Dask workers, under the same GPU lock as every other grading of the machine.
`python -m grader submit` packs a folder as `make grade` grades it, uploads it and prints the same
table; `python -m grader tokens` writes the tokens to hand out (docs/staff.md, docs/students.md).

The modules, from the course's rules to the HTTP seam:
- rules.py: course.toml's [service] table, and the roster of who may submit;
- tokens.py: each student's token and session, derived from the course's secret;
- queue.py: the queue as rows of the gradebook, and the rate limit;
- uploads.py: an upload through the batch's intake;
- dispatcher.py: queued rows graded on Dask, recorded in the gradebook;
- standing.py: what a student may read of a grading (late days, hidden cases, which one counts);
- app.py, auth.py, models.py and routes/: the HTTP seam, one router per resource;
- server.py (`serve`), client.py (`submit`), commands.py (their command lines).
"""
