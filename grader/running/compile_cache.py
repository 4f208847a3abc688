"""Triton's cache of one submission, kept between gradings of the very same files.

Every child of one grading (the correctness child, the timing child) shares one Triton cache,
autotuning results included (TRITON_CACHE_AUTOTUNING), and torch.compile's cache for the
baselines a report shows: what one child compiled and autotuned, the next loads. That cache is
the grading's own writable folder (isolation.compiled_cache), gone with the grading. Where a
grading is given a root (`grade` and `batch` use CACHE_ROOT), what the compilers left there
outlives the grading, in a folder of its own per (owner, assignment, submission files, grader
version): a second grading of the same files, by `make grade` again or a batch's `--regrade`,
compiles and autotunes nothing.

Student code runs in the children, so the kept folder is never theirs to write: no child sees
it. The grading starts from a copy of it (`restore`), and once its children have ended the
parent keeps only what has the layout of Triton's own cache (`keep`): in each key folder, a group
file with the metadata, IR and binaries it lists, and the autotuner's picks. A file a child
wrote by any other means (open, torch.save, numpy's tofile, a shared torch.from_file), a shared
library (Triton's launchers are rebuilt: a planted one would run before the next grading's
student code), and torch.compile's cache (Python modules and pickles it would load) stay behind
and go with the grading. What a child can still plant is a file posing as a compiler's output
under a key of Triton's, which only a later compile of that very kernel, in a later grading of
the very same files, loads. (Not kept, so compiled again in each grading: launchers, about a
second of gcc each on a GPU, and the shown torch.compile baselines.)

Why per submission, and never shared: a shared cache would let one submission plant a binary
under the key of another's kernel (a verbatim tutorial's, say). Here what a student's code plants
reaches only later children graded from the very files that planted it, which a TA reads in
full; every timed output is still checked against torch. A change to any file, or to the grader,
starts an empty folder, and the owner's older folders for that assignment are removed with it,
so there is one folder per owner and assignment. The grading's own folder, the copy, is bound
into that grading's sandbox alone, and its size counts against the assignment's `scratch_gib`
(limits.Watchdog).

The autotuner's picks are kept too, a timing child's apart from a correctness child's
(child/timed_picks.py): a warm grading times the configs a cold one's timed phase picked. That is
what makes the two gradings' speed ratios agree (docs/measurements.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grader
from grader.running.submission_files import graded_files

# Absolute: the sandbox binds it by path, and a relative XDG_CACHE_HOME would name another folder
# (or none) wherever a worker or a child stands.
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").absolute() / "kernel-grader" / "compiled"
# Triton's cache: a folder per key (a base32 or hex digest), holding `<kernel>.<stage>` files that
# a `__grp__<kernel>.json` lists by path, and an autotuner's `<kernel>.autotune.json`.
KEY = re.compile(r"[A-Za-z0-9_-]{16,128}")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,254}")
GROUP_PREFIX = "__grp__"
COPY_THREADS = 8  # key folders copied at once (`_copy`)
AUTOTUNE_SUFFIX = ".autotune.json"  # the timing child's `timed-` picks included (child/timed_picks.py)
STAGES = (".json", ".source", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".amdgcn", ".hsaco")  # no .so


def files_digest(folder: Path) -> str:
    """A digest of a submission's assignment folder: every file the grader uses, by relative path."""
    digest = hashlib.sha256()
    for path in graded_files(folder):
        name = str(path.relative_to(folder)).encode()
        digest.update(len(name).to_bytes(4, "little") + name + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def folder_for(root: Path, owner: str, assignment: str, submission: Path) -> Path:
    """The cache folder of `owner`'s files for `assignment` (made, private to this user), after
    removing the owner's folders of other files. `owner` is whoever the files belong to: a
    student's name in a batch, the submission's path for `grade`."""
    mine = root / hashlib.sha256(owner.encode()).hexdigest()[:24] / assignment
    mine.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = hashlib.sha256(f"{grader.__version__}|{files_digest(submission)}".encode()).hexdigest()[:32]
    for stale in mine.iterdir():
        if stale.name != key:
            shutil.rmtree(stale, ignore_errors=True)
    found = mine / key
    found.mkdir(mode=0o700, exist_ok=True)
    return found


def is_warm(folder: Path) -> bool:
    """Whether an earlier grading left compiled kernels here."""
    return folder.is_dir() and any(folder.iterdir())


def launchers(folder: Path) -> set[str]:
    """The launchers Triton built in a grading's cache (`<key>/<name>.so`, gcc's, about a second
    each on a GPU machine): counted between phases, to show where a phase's time went (never kept,
    never trusted: a child writes this folder)."""
    try:
        return {f"{key.name}/{entry.name}" for key in os.scandir(folder) if key.is_dir(follow_symlinks=False)
                for entry in os.scandir(key.path) if entry.name.endswith(".so")}  # fmt: skip
    except OSError:
        return set()


def _foreseen_mark(folder: Path, tier: str) -> Path:
    return folder / f"foreseen-{tier}"  # no key's name: `restore` never copies it, no child sees it


def foreseen(folder: Path, tier: str) -> bool:
    """Whether a grading of these files on `tier` ended here with its precompile pass complete
    (precompile.Summary.complete), and the folder has not changed since: everything that grading
    launched is here, so another pass would find every kernel compiled (a warm pass on an H200
    took 8-36 s per assignment to say so)."""
    return _foreseen_mark(folder, tier).is_file()


def mark_foreseen(folder: Path, tier: str) -> None:
    """Say `foreseen` of `folder` (written by the grading process after `keep`: a later `keep`
    that changes the folder makes it anew, without the mark)."""
    _foreseen_mark(folder, tier).touch(mode=0o600)


def _group(path: Path) -> dict[str, str]:
    try:
        listed = json.loads(path.read_text()).get("child_paths")
    except (OSError, ValueError, AttributeError):
        return {}
    return listed if isinstance(listed, dict) else {}


def compilers_files(folder: Path) -> dict[str, list[str]]:
    """Per key folder of a Triton cache, the files that have the compilers' layout: each group
    file whose every listed file is beside it under its own name, with a compiler's suffix, and
    those files; and the autotuner's picks. Links and anything else are left out."""
    found: dict[str, list[str]] = {}
    for key in os.scandir(folder):
        if not (key.is_dir(follow_symlinks=False) and KEY.fullmatch(key.name)):
            continue
        names = {e.name for e in os.scandir(key.path) if e.is_file(follow_symlinks=False) and NAME.fullmatch(e.name)}
        kept = {name for name in names if name.endswith(AUTOTUNE_SUFFIX)}
        for group in sorted(n for n in names if n.startswith(GROUP_PREFIX) and n.endswith(".json")):
            listed = _group(Path(key.path, group))
            members = {name for name, path in listed.items() if isinstance(path, str) and Path(path).name == name}
            if listed and len(members) == len(listed) and members <= names and all(m.endswith(STAGES) for m in members):
                kept |= members | {group}
        if kept:
            found[key.name] = sorted(kept)
    return found


def _copy(source: Path, target: Path, files: dict[str, list[str]], named: Path | None = None) -> None:
    """Copy `files` (compilers_files) from `source` to `target`, each group file naming the copies
    by their paths under `named` (by default `target`): Triton finds a group's files by path. A
    key folder per thread at once (each copy waits on the kernel, not on Python): one after
    another, the largest solution's warm cache took 1.5 s to restore beside five other gradings
    on an H200's host (2026-12-03), while its children waited to start."""
    named = named or target

    def copy_key(key: str) -> None:
        (target / key).mkdir(parents=True, exist_ok=True)
        for name in files[key]:
            if name.startswith(GROUP_PREFIX):
                listed = _group(source / key / name)
                (target / key / name).write_text(json.dumps({"child_paths": {n: str(named / key / n) for n in listed}}))
            else:
                shutil.copyfile(source / key / name, target / key / name)

    with ThreadPoolExecutor(COPY_THREADS, "cache-copy") as copiers:
        for done in [copiers.submit(copy_key, key) for key in files]:
            done.result()  # an error of any copy is the caller's, as one after another


def _stamps(compiled: Path, files: dict[str, list[str]]) -> dict[str, tuple[int, int, int]]:
    """Each of `files` (compilers_files) under `compiled` by its path, with its inode, size and
    change time: a file written, replaced or touched since has another (a child cannot set ctime)."""
    stamps = {}
    for key, names in files.items():
        for name in names:
            found = os.lstat(compiled / key / name)
            stamps[f"{key}/{name}"] = (found.st_ino, found.st_size, found.st_ctime_ns)
    return stamps


def restore(kept: Path, compiled: Path) -> dict[str, tuple[int, int, int]]:
    """Start a grading's own cache `compiled` from what earlier gradings of these files kept;
    returns what it wrote (`_stamps`), for `keep`."""
    if not kept.is_dir():
        return {}
    files = compilers_files(kept)
    _copy(kept, compiled, files)
    return _stamps(compiled, files)


def keep(compiled: Path, kept: Path, restored: dict[str, tuple[int, int, int]] | None = None) -> None:
    """After the grading's children have ended: `kept` becomes what the compilers left in
    `compiled`, and nothing else a child wrote there. Where that is exactly what `restore` put
    there (`restored`), every file as it was, `kept` holds it already: a grading that compiled
    nothing copies nothing (a warm grading of the largest solution copied 288 files, 42 MB, to keep them)."""
    files = compilers_files(compiled)
    if restored and _stamps(compiled, files) == restored:
        return
    fresh = kept.with_name(f".{kept.name}.{os.getpid()}.new")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(mode=0o700)
    _copy(compiled, fresh, files, kept)
    stale = kept.with_name(f".{kept.name}.{os.getpid()}.old")
    if kept.exists():
        kept.rename(stale)
    fresh.rename(kept)
    shutil.rmtree(stale, ignore_errors=True)
