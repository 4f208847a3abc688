# Every target sets up .venv/ first (grader/bootstrap.py), so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUBMISSION ?= starter
ASSIGNMENT ?=
SUBMISSIONS ?= submissions
OUT ?= graded
COURSE ?=
RELEASE ?= release
SERVER ?=

.PHONY: grade profile submit test test-slow test-gpu bench batch release clean

$(VENV)/.ready: grader/bootstrap.py grader/stack.toml
	$(PYTHON) grader/bootstrap.py
	@touch $@

grade: $(VENV)/.ready
	$(PY) -m grader grade --submission $(SUBMISSION)

# Grade, then each timed case once under Nsight Compute (advice; ASSIGNMENT="matmul softmax" for some).
profile: $(VENV)/.ready
	$(PY) -m grader profile --submission $(SUBMISSION) $(foreach a,$(ASSIGNMENT),--assignment $(a))

# Grade on the course's GPUs: SERVER=https://... and your token in GRADER_TOKEN (docs/students.md).
submit: $(VENV)/.ready
	@test -n "$(SERVER)" || { echo "make submit: name the course's service, e.g. make submit SERVER=https://grader.example.edu"; exit 2; }
	$(PY) -m grader submit --server $(SERVER) --submission $(SUBMISSION) $(foreach a,$(ASSIGNMENT),--assignment $(a))

# Two workers where pytest-xdist is installed: most of a test is a graded child process, so the
# second core halves the wait. Tests that share a costly module fixture stay on one worker (conftest.py).
XDIST = $(shell $(PY) -c "import xdist" 2>/dev/null && echo "-n 2 --dist loadgroup")
test: $(VENV)/.ready
	$(PY) -m pytest $(XDIST) -m "not slow"

# What `make test` leaves out for time: the known-wrong submissions beyond one of each reason of each
# assignment, whole classes in one batch (the hostile one among them), a class regraded in pieces
# against one graded afresh, the corpus of outside kernels graded whole, a release bundle's own
# `make test`. CI runs both.
test-slow: $(VENV)/.ready
	$(PY) -m pytest $(XDIST) -m "slow and not gpu"

test-gpu: $(VENV)/.ready
	$(PY) -m pytest -m gpu

# Without a GPU it says so first, and times nothing (pytest would skip every benchmark, one by one).
bench: $(VENV)/.ready
	@if $(PY) -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then \
		$(PY) -m pytest tests/bench_kernels.py --submission $(SUBMISSION) \
			--benchmark-autosave --benchmark-compare --benchmark-columns=min,median,max,rounds; \
	else \
		echo "make bench: benchmarks need a CUDA GPU, and torch sees none here, so nothing was timed."; \
		echo "On this machine, make grade grades your kernels' correctness; run make bench where there is a GPU."; \
	fi

# COURSE=course.toml grades with the course's deadlines, review and Canvas roster; a folder graded
# with one is never rewritten without it (the batch refuses).
batch: $(VENV)/.ready
	$(PY) -m grader batch $(SUBMISSIONS) --out $(OUT) $(if $(COURSE),--course $(COURSE))

release: $(VENV)/.ready
	$(PY) -m grader release --out $(RELEASE)
	$(PY) -m grader gradescope --out $(RELEASE)-autograder.zip

clean:
	rm -rf $(VENV) results .pytest_cache
