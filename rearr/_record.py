"""Record: the immutable data class of rearr's stages (IR, Recipe, Plan and its steps).

Written like a frozen dataclass, fields as annotations with optional defaults::

    class Axis(Record):
        name: str
        col: int
        index: Index | None = None

and it behaves like one: keyword or positional construction, equality and
hashing by type and field values, a readable repr, no assignment after
construction, ``replace(**changes)`` for a modified copy. A class may name
fields in ``_uncompared`` (a plain class attribute, not a field): they are left
out of equality, hashing and the repr, as ``field(compare=False, repr=False)``
would. Why not
``@dataclass(frozen=True)``: it compiles four or five methods from source for
every class at import, and rearr has thirty such classes while ``import rearr``
is meant to cost about what ``import einops`` costs. Here the metaclass only
turns the annotations into ``__slots__`` (no per-instance dict, a little faster
to read) and one shared ``__init__`` serves every class, so creating a class
compiles nothing. Fields are not inherited: a Record subclass
derives from Record alone.
"""

from __future__ import annotations

from typing import Any


class _RecordType(type):
    def __new__(mcls, name: str, bases: tuple, namespace: dict[str, Any]) -> _RecordType:
        # Requires `from __future__ import annotations` (or eager annotations) in the defining module.
        fields = tuple(namespace.get("__annotations__", ()))
        defaults = {f: namespace.pop(f) for f in fields if f in namespace}  # a slot and a class value clash
        namespace["__slots__"] = fields
        cls = super().__new__(mcls, name, bases, namespace)
        cls._fields = fields
        cls._defaults = defaults
        cls._compared = tuple(f for f in fields if f not in namespace.get("_uncompared", ()))
        return cls


class Record(metaclass=_RecordType):
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    _compared: tuple[str, ...] = ()  # the fields that equality, hashing and the repr look at

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes {len(fields)} fields, {len(args)} were given")
        assign = object.__setattr__
        for name, value in zip(fields, args):
            assign(self, name, value)
        for name in fields[len(args):]:
            if name in kwargs:
                assign(self, name, kwargs.pop(name))
            elif name in self._defaults:
                assign(self, name, self._defaults[name])
            else:
                raise TypeError(f"{type(self).__name__} needs the field {name!r}")
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field {next(iter(kwargs))!r}")

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._compared)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.__class__, self._key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._compared)})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple:  # copy and pickle build a new record (they would assign the slots)
        return self.__class__, self._values()

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed, as dataclasses.replace."""
        return self.__class__(**{f: changes.pop(f) if f in changes else getattr(self, f) for f in self._fields},
                              **changes)
