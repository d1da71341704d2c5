"""tokenplan.records.quick_init: the quicker __init__ builds the same records as the generated one."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from tokenplan.records import quick_init, quick_replace


@dataclass(frozen=True, slots=True)
class _Plain:
    a: float
    b: str = "x"
    c: list[int] = field(default_factory=list)
    d: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", self.a * 2)


@dataclass(frozen=True, slots=True)
class _Quick:
    a: float
    b: str = "x"
    c: list[int] = field(default_factory=list)
    d: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", self.a * 2)


quick_init(_Quick)


def test_same_fields_defaults_and_post_init() -> None:
    for args, kwargs in (((1.5,), {}), ((1.5, "y"), {}), ((), {"a": 3.0, "c": [1]})):
        plain, quick = _Plain(*args, **kwargs), _Quick(*args, **kwargs)
        assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
    assert _Quick(1.0).d == 2.0  # __post_init__ ran: 1.0 × 2
    assert inspect.signature(_Quick).parameters.keys() == inspect.signature(_Plain).parameters.keys()


def test_factory_per_instance_and_still_frozen() -> None:
    one, two = _Quick(1.0), _Quick(1.0)
    assert one.c is not two.c  # a new list each, as default_factory gives
    assert one == two and hash(_Quick(1.0, "z", None)) == hash(_Quick(1.0, "z", None))  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Quick()  # type: ignore[call-arg]


def test_refuses_a_class_without_slots() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: float

    with pytest.raises(TypeError, match="frozen dataclass with slots"):
        quick_init(NoSlots)


def test_quick_replace_as_dataclasses_replace() -> None:
    one = _Quick(1.0, "y", [3])
    for changes in ({}, {"a": 4.0}, {"b": "z", "c": [5]}):
        assert dataclasses.astuple(quick_replace(one, **changes)) == dataclasses.astuple(
            dataclasses.replace(one, **changes)
        )
    assert quick_replace(one, a=4.0).d == 8.0  # __post_init__ ran again: 4.0 × 2
    with pytest.raises(TypeError, match="no init field"):
        quick_replace(one, d=1.0)  # not an init field (dataclasses.replace refuses it too)
