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
        if not bases:  # Record itself: its annotations are the class attributes below, not fields
            return super().__new__(mcls, name, bases, namespace)
        fields = tuple(namespace.get("__annotations__", ()))
        uncompared = namespace.get("_uncompared", ())
        # a default leaves the namespace: a slot and a class value of one name clash
        namespace["_defaults"] = {f: namespace.pop(f) for f in fields if f in namespace}
        namespace["__slots__"] = namespace["_fields"] = fields
        namespace["_compared"] = tuple(f for f in fields if f not in uncompared) if uncompared else fields
        namespace["_setters"] = None  # made by the first construction (see Record._setters)
        return super().__new__(mcls, name, bases, namespace)


class Record(metaclass=_RecordType):
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    _compared: tuple[str, ...] = ()  # the fields that equality, hashing and the repr look at
    # Each field's slot setter, in the order of _fields, bound on the first construction: __init__ fills a
    # slot with one call of it, cheaper than object.__setattr__ (a frozen class cannot use plain
    # assignment). Not made with the class: `import rearr` and a first call create thirty classes.
    _setters: tuple[Any, ...] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        setters = self._setters
        if setters is not None and len(args) == len(setters) and not kwargs:  # every field given, in order
            for set_field, value in zip(setters, args):
                set_field(self, value)
            return
        cls = type(self)
        if setters is None:
            slots = vars(cls)
            cls._setters = setters = tuple(slots[f].__set__ for f in cls._fields)
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__} takes {len(fields)} fields, {len(args)} were given")
        for set_field, value in zip(setters, args):
            set_field(self, value)
        for name, set_field in zip(fields[len(args):], setters[len(args):]):
            if name in kwargs:
                set_field(self, kwargs.pop(name))
            elif name in self._defaults:
                set_field(self, self._defaults[name])
            else:
                raise TypeError(f"{cls.__name__} needs the field {name!r}")
        if kwargs:
            raise TypeError(f"{cls.__name__} has no field {next(iter(kwargs))!r}")

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
        values = [changes.pop(f) if f in changes else getattr(self, f) for f in self._fields]
        if changes:
            raise TypeError(f"{type(self).__name__} has no field {next(iter(changes))!r}")
        return self.__class__(*values)
