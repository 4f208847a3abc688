import os
import sys

from grader.cli import main

status = main()
# Without the interpreter's teardown, which takes a second or two with torch and Triton loaded
# (every file is written and closed, every child reaped and every cluster closed by now).
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
