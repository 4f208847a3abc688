"""The course's secret salt: it makes a batch's inputs unguessable, so it must stay out of every
child's reach, sandboxed or not.

It comes from a file the teaching assistant names (GRADER_SALT_FILE, or course.toml's
`salt_file`), read once by the batch's own process and handed to its workers as an argument. It
never comes from the environment: every process the grader starts would inherit it, and any
process of the same user can read another's initial environment (/proc/PID/environ), which
removing the variable later does not erase. GRADER_SALT in the environment is refused, with
what to do instead. Nor may the file lie where a child reads: the system's folders, the Python
installation, the grader's code and the assignments (what the sandbox, or Landlock without it,
shows a child: sandbox.readable_paths); anywhere else (a home folder, say) no child sees it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from grader.running import sandbox

FILE_VARIABLE = "GRADER_SALT_FILE"
REFUSED_VARIABLE = "GRADER_SALT"
ADVICE = ("write the salt to a file only you can read (`umask 077; mkdir -p ~/.config/kernel-grader; "
          "echo YOUR-SECRET > ~/.config/kernel-grader/salt`) and name it with "
          f"{FILE_VARIABLE}=~/.config/kernel-grader/salt, or with salt_file in course.toml")  # fmt: skip


class SaltError(ValueError):
    """The salt cannot be used as given; the message says what to do instead."""


def read_salt(path: Path | str) -> str:
    """The salt in the file at `path` (surrounding whitespace stripped). SaltError where the
    file is unreadable or empty, or lies where a child of the grader could read it."""
    named = Path(path).expanduser().absolute()
    real = named.resolve()
    for shown in [*map(Path, sandbox.SYSTEM), *sandbox.readable_paths([])]:
        if real.is_relative_to(Path(os.path.realpath(shown))):
            raise SaltError(f"salt file {named}: student code can read {shown}, where it lies; {ADVICE}")
    try:
        salt = real.read_text().strip()
    except OSError as error:
        raise SaltError(f"salt file {named}: {error.strerror}") from None
    if not salt:
        raise SaltError(f"salt file {named} is empty")
    return salt


def from_environment(environ: Mapping[str, str] | None = None) -> str:
    """The batch's salt: the file GRADER_SALT_FILE names, or "" where it names none.
    SaltError where GRADER_SALT is set."""
    environ = os.environ if environ is None else environ
    if REFUSED_VARIABLE in environ:
        raise SaltError(f"{REFUSED_VARIABLE} is set in the environment, where every process the grader starts "
                        "inherits it and any process of yours can read it (/proc/PID/environ), student code "
                        f"included: unset it; {ADVICE}")  # fmt: skip
    path = environ.get(FILE_VARIABLE, "")
    return read_salt(path) if path else ""
