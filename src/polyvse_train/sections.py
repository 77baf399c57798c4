"""What a config section is: a dataclass of typed fields that checks its own values (``polyvse_train.config``'s
sections, and each objective's options in ``polyvse_train.objectives``), with the helpers its checks use."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar, get_type_hints

from polyvse.errors import DataError


class Section:
    """A config section: a dataclass whose fields are typed and which checks its own values."""

    key: ClassVar[str] = ""
    #: field -> its flat name where that differs from the field's name
    flat_names: ClassVar[dict[str, str]] = {}
    #: pydantic's settings for checking a section's types (``check_types``): strict (no "3" for 3, no 1.5 or
    #: true for an int, no tuple for a list; an int for a float is fine), the dataclass's fields as they are
    __pydantic_config__: ClassVar[dict] = {"strict": True, "revalidate_instances": "always"}

    def check(self, fail) -> None:
        """Call ``fail(field, message)`` for a value that is not allowed."""

    @classmethod
    def flat_name(cls, name: str) -> str:
        return cls.flat_names.get(name, name)

    @classmethod
    def own_fields(cls) -> list[dataclasses.Field]:
        """The fields that are the section's settings, each with a flat name."""
        return list(dataclasses.fields(cls))

    @classmethod
    def from_values(cls, values: dict[str, Any], source: str) -> Section:
        """The section of a normalised mapping of its fields (``source``: where they come from, for errors)."""
        return cls(**values)

    def check_types(self, source: str, path: str = "") -> None:
        """A DataError naming the field (its path under ``path``, default the section's key, and its flat name)
        whose value does not have the field's type. pydantic checks them; the values are kept as given (an int
        stays an int where the field is a float: a config's flat form, and so a run's digest, is what its file
        says)."""
        from pydantic import ValidationError

        try:
            _type_checker(type(self)).validate_python(self)
        except ValidationError as exc:
            error = exc.errors()[0]
            name = error["loc"][0]
            expected = get_type_hints(type(self))[name]
            expected = expected.__name__ if isinstance(expected, type) else str(expected)
            raise DataError(
                f"field {path or self.key}.{name} ({self.flat_name(name)!r}) must be {expected}, got "
                f"{getattr(self, name)!r}{_inner_type_error(name, error)}",
                source,
            ) from None


@functools.cache
def _type_checker(section: type):
    from pydantic import TypeAdapter

    return TypeAdapter(section)


def _inner_type_error(name: str, error: dict) -> str:
    """`` (languages[0]: input should be a valid string, got 1)`` for an error inside a list or mapping."""
    inner = error["loc"][1:]
    if not inner:
        return ""
    if inner[-1] == "[key]":
        where = f"a key of {name}"
    else:
        where = name + "".join(f"[{part!r}]" for part in inner)
    message = error["msg"][:1].lower() + error["msg"][1:]
    return f" ({where}: {message}, got {error['input']!r})"


def one_of(fail, section, name: str, allowed) -> None:
    value = getattr(section, name)
    if value not in allowed:
        fail(name, f"{value!r}: use one of {', '.join(allowed)}")


def at_least(fail, section, name: str, low) -> None:
    value = getattr(section, name)
    if value < low:
        fail(name, f"must be {low} or more, got {value}")
