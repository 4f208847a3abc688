"""The child's side of the process boundary: the only code that runs beside student code.

Everything in this package runs inside the sandboxed child process (isolation.py starts it).
What it sends back crosses the boundary as the typed messages of grader/messages/, and the
parent treats every one of them as untrusted data.
"""
