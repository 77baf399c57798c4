"""Package attributes imported on first use (PEP 562), so importing a package costs only what is used.

__getattr__ = lazy_attributes(__name__, {"Searcher": ".search", ...})
"""

from __future__ import annotations

import importlib
import sys


def lazy_attributes(package: str, where: dict[str, str]):
    """A module-level ``__getattr__`` for ``package`` that imports ``name`` from submodule ``where[name]``."""

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        setattr(sys.modules[package], name, value)  # later look-ups skip this function
        return value

    return __getattr__
