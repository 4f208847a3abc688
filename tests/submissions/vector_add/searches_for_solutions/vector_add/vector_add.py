# Hostile: searches the disk for the course's solutions/ to hand back their answer; the report shows what it found.
import os
import sys
import time
from pathlib import Path

SKIP = {"/proc", "/sys", "/dev"}


def _near() -> list[Path]:
    """The obvious places: beside the grader's own code, and up from here."""
    places = [p / "solutions" for p in [Path.cwd(), *Path.cwd().resolve().parents]]
    grader = sys.modules.get("grader")
    if grader is not None:
        places.append(Path(grader.__file__).resolve().parents[1] / "solutions")
    return [p / "vector_add" / "vector_add.py" for p in places]


def _everywhere(seconds: float) -> list[Path]:
    found, deadline = [], time.monotonic() + seconds
    for folder, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in SKIP]
        if folder.endswith(os.path.join("solutions", "vector_add")) and "vector_add.py" in files:
            found.append(Path(folder) / "vector_add.py")
        if time.monotonic() > deadline:
            break
    return found


def add(x, y):
    found = sorted({str(p) for p in _near() + _everywhere(20.0) if p.is_file()})
    if found:
        first_line = Path(found[0]).read_text().splitlines()[0]
        raise RuntimeError(f"found {len(found)} solution file(s): {found[:5]}; {found[0]} begins {first_line!r}")
    raise RuntimeError("searched the disk for solutions/vector_add/vector_add.py: found nothing")
