"""Errors that carry enough context (file, line, field) for a user to fix their input."""

from __future__ import annotations


class PolyvseError(Exception):
    """Base class for every error polyvse raises on purpose."""


class DataError(PolyvseError):
    """Bad input data: names the file and line (when known) and what to do about it."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        self.reason = message
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + message)


class MissingDataError(DataError):
    """A data file or folder that is not there at all (not fetched, or the wrong data root): every run that reads
    it would fail the same way, so batch commands (the zoo) stop at it instead of recording one failure per run."""


class UnknownLanguageError(PolyvseError, ValueError):
    """A language code polyvse has no tokenizer for."""


class CheckpointError(PolyvseError):
    """A checkpoint that is missing, corrupt or does not match what it is used with."""
