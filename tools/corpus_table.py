"""The corpus's agreement table for docs/measurements.md (its `corpus` record): per public kernel,
how many of the cases both tiers grade got the same verdict on the CPU tier as on the GPU, and
where they differ, why.

    CORPUS_RESULTS=corpus-results .venv/bin/python -m pytest tests/test_corpus.py            # CPU tier
    CORPUS_RESULTS=corpus-results .venv/bin/python -m pytest -m gpu tests/test_corpus.py     # on a GPU
    .venv/bin/python tools/corpus_table.py corpus-results

Each run leaves `<tier>-<entry>.json` (case -> reason) in the folder; this prints the Markdown table.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections import Counter
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"


COLUMNS = ["kernel", "cases on both tiers", "same verdict", "differ (why)", "verdicts (CPU tier / GPU tier)"]


def rows(results: Path) -> list[list[str]]:
    """A row per kernel both tiers' runs left verdicts for."""
    found = []
    for gpu_file in sorted(results.glob("gpu-*.json")):
        entry = gpu_file.stem.removeprefix("gpu-")
        cpu_file = results / f"cpu-{entry}.json"
        if not cpu_file.exists():
            continue
        cpu, gpu = json.loads(cpu_file.read_text()), json.loads(gpu_file.read_text())
        differs = tomllib.loads((CORPUS / entry / "expect.toml").read_text()).get("differs", {})
        both = [name for name in gpu if name in cpu and not name.endswith(": load") and cpu[name] != "no_gpu"]
        same = [name for name in both if cpu[name] == gpu[name]]
        explained = [name for name in both if cpu[name] != gpu[name] and _explained(name, differs)]
        unexplained = len(both) - len(same) - len(explained)
        why = f"{len(explained)} (reason in expect.toml)" if explained else "0"
        if unexplained:
            why += f"; {unexplained} UNEXPLAINED"
        tally = lambda verdicts: ", ".join(f"{r} {n}" for r, n in Counter(verdicts[c] for c in both).most_common())
        found.append([entry, str(len(both)), str(len(same)), why, f"{tally(cpu) or '-'} / {tally(gpu) or '-'}"])
    return found


def table(results: Path) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows(results)])


def _explained(name: str, differs: dict) -> bool:
    return name in differs or name.split("/", 1)[1] in differs


if __name__ == "__main__":
    print(table(Path(sys.argv[1] if len(sys.argv) > 1 else "corpus-results")))
