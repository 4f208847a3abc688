"""A message as JSON and back. The parent's job goes out as plain data (`job_json`); everything the
child sends comes back through `decode`, which builds the typed message or raises ProtocolError,
caps every string and list, and cleans every string of control sequences, so nothing the child
says can crash, hang or mislead the parent, the terminal or a report."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from grader.judging.reasons import CHILD_FAILURES
from grader.messages import job, reports, specializations
from grader.messages.job import Job, Task
from grader.messages.reports import MESSAGES, OUTCOMES, Failure
from grader.reporting.text import printable

MAX_TEXT = 64 * 1024  # characters of one string from the child
MAX_ITEMS = 20_000  # entries of one list or dict from the child
# Every dataclass of a message: what a message may hold.
DATACLASSES = tuple(v for module in (job, reports, specializations) for v in vars(module).values()
                    if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == module.__name__)  # fmt: skip


class ProtocolError(Exception):
    """The child sent something that is not a message of the grader's: `reason` says which verdict."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def _plain(value: Any) -> Any:
    """A message as JSON-ready data; a union member carries its class name under "type"."""
    if dataclasses.is_dataclass(value):
        data = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **data} if type(value).__name__ in OUTCOMES else data
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def job_json(job: Job) -> bytes:
    """The job as one line of JSON: a child started ahead reads its tasks as a second line (`tasks_json`)."""
    return json.dumps(_plain(job)).encode() + b"\n"


def read_job(data: bytes) -> Job:
    """The child reads its job (trusted: the parent wrote it)."""
    return _build(Job, json.loads(data), "job")


def tasks_json(tasks: list[Task]) -> bytes:
    """The tasks of a child started ahead of them (Job.ahead), as the line that follows its job."""
    return json.dumps(_plain(tasks)).encode() + b"\n"


def read_tasks(data: bytes) -> list[Task]:
    return _build(list[Task], json.loads(data), "tasks")


def decode(header: bytes) -> Any:
    """One message from the child, typed and cleaned, or ProtocolError."""
    try:
        data = json.loads(header)
    except (ValueError, RecursionError) as error:
        raise ProtocolError("crash", f"a message from the child was not JSON ({error})") from None
    if not isinstance(data, dict) or data.get("type") not in MESSAGES:
        raise ProtocolError("tampering", "a message from the child names no known message type")
    return _build(MESSAGES[data["type"]], data.get("body"), data["type"])


def _fail(where: str, expected: str) -> ProtocolError:
    return ProtocolError("tampering", f"a message from the child is malformed at {where}: expected {expected}")


def _build(kind: Any, data: Any, where: str) -> Any:
    """`data` checked against the type `kind` (a dataclass, list[...], dict[str, ...], a union, a scalar)."""
    origin, arguments = typing.get_origin(kind), typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        if data is None and type(None) in arguments:
            return None
        if isinstance(data, dict) and data.get("type") in OUTCOMES and OUTCOMES[data["type"]] in arguments:
            return _build(OUTCOMES[data["type"]], data, where)
        members = [a for a in arguments if a is not type(None)]
        if len(members) == 1:
            return _build(members[0], data, where)
        raise _fail(where, "one of " + ", ".join(a.__name__ for a in members))
    if origin is list:
        if not isinstance(data, list) or len(data) > MAX_ITEMS:
            raise _fail(where, f"a list of at most {MAX_ITEMS} items")
        return [_build(arguments[0], item, f"{where}[{i}]") for i, item in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict) or len(data) > MAX_ITEMS:
            raise _fail(where, f"a mapping of at most {MAX_ITEMS} entries")
        return {printable(str(k), 200): _build(arguments[1], v, f"{where}.{k}") for k, v in data.items()}
    if dataclasses.is_dataclass(kind):
        return _build_dataclass(kind, data, where)
    return _scalar(kind, data, where)


def _build_dataclass(kind: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise _fail(where, f"a {kind.__name__}")
    hints = typing.get_type_hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        if f.name in data:
            values[f.name] = _build(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _fail(f"{where}.{f.name}", "a value")
    if kind is Failure and values["reason"] not in CHILD_FAILURES:
        raise _fail(f"{where}.reason", "a reason a child may give for a failure")
    return kind(**values)


def _scalar(kind: Any, data: Any, where: str) -> Any:
    if kind is bool:
        if isinstance(data, bool):
            return data
    elif kind is int:
        if isinstance(data, int) and not isinstance(data, bool) and abs(data) < 1 << 62:
            return data
    elif kind is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif kind is str:
        if isinstance(data, str):
            return printable(data, MAX_TEXT)
    raise _fail(where, getattr(kind, "__name__", str(kind)))
