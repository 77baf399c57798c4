"""Griffe extension of the API reference (mkdocs.yml: the mkdocstrings handler's ``extensions``).

polyvse's docstrings name other code with Sphinx roles (``:func:`load```, ``:class:`~polyvse.errors.DataError```),
which mkdocstrings, reading docstrings as Markdown, would print as they are. This rewrites each role into a code
span of its target as Sphinx would show it: ``~`` keeps the last component, a leading ``.`` is dropped.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension, Object

_ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|obj|exc|const|type):`(?P<target>[^`]+)`")


def rewrite_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by a Markdown code span of what it names."""

    def span(m: re.Match) -> str:
        target = m.group("target").strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<ref>[^>]+)>", target)  # :func:`title <target>`
        if explicit:
            return f"`{explicit.group('title')}`"
        if target.startswith("~"):
            target = target[1:].rsplit(".", 1)[-1]
        return f"`{target.lstrip('.')}`"

    return _ROLE.sub(span, text)


class DocstringRoles(Extension):
    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = rewrite_roles(obj.docstring.value)
