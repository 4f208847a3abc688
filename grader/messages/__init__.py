"""What crosses the process boundary between the grader (the parent) and the child that runs student code.

Parent to child: one `Job` (job.py) as JSON on the child's standard input, read once and closed.
Child to parent: the messages of reports.py, each in a signed frame on a pipe (frames.py). A
message becomes JSON and comes back typed through decoding.py, where everything the parent reads
is checked: it is untrusted. A GPU timing child's kept outputs cross in a memory file the parent
made (kept_file.py), each named by a signed frame, fingerprinted on the GPU by the harness and
again by the parent as it loads it.

What the signature proves, and what it does not. The key never meets a name student code can
rebind (frames.FrameWriter), so student code cannot sign a frame, nor rewrite one through a
library the writer would have looked up. But the harness that composes each message runs in the
student's process, after student code: a submission that replaces a function or class attribute
of the grader's own modules, or a Python builtin, and puts it back before the harness looks
(snapshot.HarnessSnapshot compares identities after every task), can change what the harness
says before it is signed. That is detected only when the change is still there at the check.
The parent's own check of every output's bytes against its reference does not depend on it.
"""
