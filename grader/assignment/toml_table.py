"""A table of assignment.toml as the loader reads it: each key read through it is checked for its
type and remembered, so a key nobody read is reported as unknown, and every error names the file,
the table and the key (spec.py builds the typed tree with it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class SpecError(ValueError):
    """assignment.toml is malformed; the message names the file, the key and the expectation."""


class Table:
    """A TOML table that remembers where it came from, so every error can say so."""

    def __init__(self, data: dict[str, Any], path: Path, where: str):
        self.data, self.path, self.where = data, path, where
        self.used: set[str] = set()

    def fail(self, key: str, expected: str) -> SpecError:
        got = self.data.get(key, "<missing>")
        return SpecError(f"{self.path}: [{self.where}] key '{key}': expected {expected}, got {got!r}")

    def get(self, key: str, kind: type | tuple[type, ...], expected: str, default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise self.fail(key, expected)
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise self.fail(key, expected)
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        self.used.add(key)
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        value = self.get(key, str, f"one of {', '.join(choices)}", default)
        if value not in choices:
            raise self.fail(key, f"one of {', '.join(choices)}")
        return value

    def positive(self, key: str, kind: type | tuple[type, ...] = (int, float), default: Any = ...) -> Any:
        value = self.get(key, kind, "a positive number", default)
        if value is not None and value <= 0:
            raise self.fail(key, "a positive number")
        return value

    def within(self, key: str, item: Any = None) -> str:
        """Where a key's value sits, for errors: "parts[2] (backward).cases[0]" names a part
        by its index and, where it has one, its name."""
        name = f" ({item['name']})" if isinstance(item, dict) and isinstance(item.get("name"), str) else ""
        return f"{self.where}.{key}{name}" if self.where else f"{key}{name}"

    def table(self, key: str) -> Table:
        return Table(self.get(key, dict, "a table"), self.path, self.within(key))

    def tables(self, key: str, default: Any = ...) -> list[Table]:
        items = self.get(key, list, "an array of tables", default)
        if not all(isinstance(item, dict) for item in items):
            raise self.fail(key, "an array of tables")
        return [Table(item, self.path, self.within(f"{key}[{i}]", item)) for i, item in enumerate(items)]

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise SpecError(f"{self.path}: [{self.where}] unknown key(s): {', '.join(unknown)}")
