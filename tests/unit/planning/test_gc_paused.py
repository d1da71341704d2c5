"""``planning.search.cyclic_gc_paused``: the search pauses CPython's cyclic collector and gives it
back as it found it, also when the block raises; the search's figures do not depend on it."""

from __future__ import annotations

import gc

import pytest

from tokenplan.planning.search import cyclic_gc_paused


def test_the_collector_is_off_inside_and_back_on_after():
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_is_back_on_after_an_error():
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("a search that failed")
    assert gc.isenabled()


def test_a_caller_that_had_it_off_keeps_it_off():
    gc.disable()
    try:
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
