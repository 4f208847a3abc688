"""The pinned stack (grader/stack.toml, beside bootstrap.py) and whether this machine runs it.

Both tiers must run the same Triton: the CPU tier's verdicts predict the GPU's only when the
interpreter and the compiler are those the GPU tier uses. torch differs by build (the GPU image's,
and torch's CPU build), and is pinned per tier. A machine that differs from the pin still grades,
and every report says so, loudly.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

PIN = Path(__file__).resolve().parents[1] / "stack.toml"  # beside bootstrap.py, which the Makefile runs by path


def pinned() -> dict[str, str]:
    return tomllib.loads(PIN.read_text())


def cpu_requirements() -> list[str]:
    """What a machine without a GPU installs: pip requirement strings."""
    pin = pinned()
    return [f"torch=={pin['torch-cpu']}", f"triton=={pin['triton']}", f"numpy{pin['numpy-cpu']}"]


def installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _matches(version: str | None, pin: str) -> bool:
    """`pin` "2.11" matches 2.11.0+cu130; "3.6.0" matches 3.6.0 only."""
    if version is None:
        return False
    release = version.split("+")[0].split(".")
    return release[: len(pin.split("."))] == pin.split(".")


def differences(device: str) -> list[str]:
    """How this machine's torch and Triton differ from the pin, in words ([] when they do not)."""
    pin = pinned()
    wanted = {"triton": pin["triton"], "torch": pin["torch-gpu" if device == "cuda" else "torch-cpu"]}
    return [f"{package} {installed(package) or 'missing'} (pinned {version})"
            for package, version in wanted.items() if not _matches(installed(package), version)]  # fmt: skip


DIFFERS = "DIFFERS FROM THE PINNED STACK: "


def line(device: str) -> str:
    """The environment's `stack` entry: "as pinned", or how this machine differs, in capitals."""
    differs = differences(device)
    if not differs:
        return "as pinned"
    return DIFFERS + ", ".join(differs) + "; verdicts here may not be the ones the grading machine gives"


def warning(environment: dict) -> str:
    """The sentence every report, results.json and class page puts first when a grade was given on
    a machine whose torch or Triton is not the pinned one ('' when it was)."""
    stated = str(environment.get("stack", ""))
    return f"Warning: graded where the stack {stated}" if stated.startswith(DIFFERS) else ""
