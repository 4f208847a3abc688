"""An assignment as data: assignment.toml parsed into a typed tree (spec, loading, toml_table), the
inputs and float64 references of its cases (cases), and the size of each case's right output
(output_sizes)."""
