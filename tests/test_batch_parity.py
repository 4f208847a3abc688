"""tools/batch_parity.py's arithmetic on a shared pass's hold log (the no-gap bound docs/measurements.md quotes)."""

from __future__ import annotations

import importlib.util

from conftest import TESTS

spec = importlib.util.spec_from_file_location("batch_parity", TESTS.parent / "tools" / "batch_parity.py")
batch_parity = importlib.util.module_from_spec(spec)
spec.loader.exec_module(batch_parity)

# Epoch seconds from 1000: a correctness run, then two timed phases, each with its sending; the
# second asked while the first held the GPU. The pass ended at 20 s.
LOG = """\
shared 1000.500 1000.500 1002.000 11 vector_add correctness
exclusive 1003.000 1004.000 1006.000 11 vector_add timing
shared 1006.000 1006.000 1006.500 11 vector_add timing sending
shared 1006.600 1006.600 1007.000 11 vector_add timing judging
exclusive 1005.000 1007.000 1008.000 12 vector_add timing
shared 1008.000 1008.000 1008.700 12 vector_add timing sending
"""


def test_the_bound_is_the_first_timed_phase_the_holds_the_sendings_but_the_last_and_the_end(tmp_path):
    log = tmp_path / "holds.log"
    log.write_text(LOG)
    bound = batch_parity.no_gap_bound({"began": 1000.0, "seconds": 20.0, "holds": str(log)})
    assert bound == {"first_timed_s": 4.0, "timed_s": 3.0, "sendings_but_the_last_s": 0.5,
                     "after_the_last_timed_s": 12.0, "timed_phases": 2, "seconds": 19.5}  # fmt: skip


def test_no_log_or_no_timed_phase_gives_no_bound(tmp_path):
    log = tmp_path / "holds.log"
    assert batch_parity.no_gap_bound({"began": 1000.0, "seconds": 20.0, "holds": str(log)}) is None
    assert batch_parity.no_gap_bound({"began": 1000.0, "seconds": 20.0}) is None  # a pass from before the log
    log.write_text(LOG.splitlines()[0] + "\n")
    assert batch_parity.no_gap_bound({"began": 1000.0, "seconds": 20.0, "holds": str(log)}) is None
