"""An autograder for GPU-kernel assignments: numerics against torch, speed on a GPU, a report per student."""

__version__ = "0.1.0"
