"""rearr._record.Record, the frozen data class of every stage: construction in each form, the errors,
immutability, equality, copies."""

from __future__ import annotations

import copy
import pickle

import pytest

from rearr._record import Record


class Point(Record):
    x: int
    y: int
    label: str = "p"
    tags: tuple = ()


class Named(Record):
    name: str
    note: str = ""
    _uncompared = ("note",)


class Empty(Record):
    pass


def test_every_form_of_construction_fills_every_field():
    for p in (Point(1, 2, "q", ("a",)), Point(1, 2, label="q", tags=("a",)), Point(x=1, y=2, label="q", tags=("a",)),
              Point(1, y=2, tags=("a",), label="q")):
        assert (p.x, p.y, p.label, p.tags) == (1, 2, "q", ("a",))
    assert (Point(1, 2).label, Point(1, 2).tags, Point(1, 2, "r").tags) == ("p", (), ())
    assert Empty() == Empty()


def test_the_first_construction_of_a_class_may_use_any_form():
    class Fresh(Record):
        a: int
        b: int = 5

    assert (Fresh(a=1).a, Fresh(a=1).b, Fresh(2, 3).b) == (1, 5, 3)


@pytest.mark.parametrize("make, message", [
    (lambda: Point(1), "Point needs the field 'y'"),
    (lambda: Point(1, 2, "q", (), 5), "Point takes 4 fields, 5 were given"),
    (lambda: Point(1, 2, z=3), "Point has no field 'z'"),
    (lambda: Point(1, 2).replace(z=3), "Point has no field 'z'"),
])
def test_a_wrong_construction_says_which_field(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_a_record_is_frozen_and_keeps_no_dict():
    p = Point(1, 2)
    with pytest.raises(AttributeError, match="immutable"):
        p.x = 3
    with pytest.raises(AttributeError, match="immutable"):
        del p.x
    assert not hasattr(p, "__dict__")
    assert Point.__slots__ == ("x", "y", "label", "tags") and Record.__slots__ == ()


def test_replace_copies_with_changes_and_leaves_the_original():
    p = Point(1, 2, tags=("a",))
    q = p.replace(y=5, label="r")
    assert (q.x, q.y, q.label, q.tags) == (1, 5, "r", ("a",)) and (p.y, p.label) == (2, "p")


def test_equality_hashing_and_repr_by_type_and_compared_fields():
    assert Point(1, 2) == Point(x=1, y=2) and hash(Point(1, 2)) == hash(Point(x=1, y=2))
    assert Point(1, 2) != Point(1, 3)
    assert Named("a", "one") == Named("a", "two") and hash(Named("a", "one")) == hash(Named("a", "two"))
    assert repr(Point(1, 2)) == "Point(x=1, y=2, label='p', tags=())" and repr(Named("a", "n")) == "Named(name='a')"

    class Other(Record):
        x: int
        y: int
        label: str = "p"
        tags: tuple = ()

    assert Point(1, 2) != Other(1, 2)


def test_copy_and_pickle_build_an_equal_record():
    p = Point(1, 2, tags=(Point(3, 4),))
    for q in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert q == p and q.tags[0].y == 4
