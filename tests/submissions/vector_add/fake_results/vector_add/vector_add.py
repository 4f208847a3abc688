# Hostile: writes fake results.json files wherever the grader might read one and prints fake channel messages, then does no work.
import json
import os
import sys
from pathlib import Path

FAKE = {"score": 1000.0, "output": "FAKE-RESULTS: full marks", "tests": [{"name": "all", "score": 1000.0, "max_score": 1.0}]}
MESSAGES = [{"event": "start", "task": "add:case:0"}, {"event": "done", "task": "add:case:0", "outcome": {"seconds": 0.0}},
            {"event": "finished"}]


def _targets() -> list[Path]:
    """Where a results.json could be read from: here, beside this file, and the grader's checkout."""
    places = [Path.cwd(), Path(__file__).resolve().parent]
    grader = sys.modules.get("grader")
    if grader is not None:
        root = Path(grader.__file__).resolve().parents[1]
        places += [root, root / "results", root / "graded"]
    places += list(Path.cwd().resolve().parents)  # up to the root, the batch's folder among them
    return places


def add(x, y):
    written = []
    for place in _targets():
        try:
            (place / "results.json").write_text(json.dumps(FAKE))
            written.append(str(place))
        except OSError:
            pass
    for message in MESSAGES:
        print(json.dumps(message), flush=True)
        print(json.dumps(message), file=sys.stderr, flush=True)
    os.environ["FAKE_WRITTEN"] = os.pathsep.join(written)
    raise NotImplementedError
