"""The grader's witness of the GPU tier: a CUPTI library in each GPU child, read by the parent (docs/witness.md)."""
