"""Every engine of catalog/engines.yaml is built by its own module and keeps the whole Engine
protocol; a catalog entry with a key its engine does not know is a defect that fails here."""

from __future__ import annotations

import pytest

from tokenplan.catalog import _engine_raw, load_engine
from tokenplan.engines import ENGINE_TYPES, Engine, from_catalog
from tokenplan.errors import CatalogError


def test_each_catalog_engine_has_an_implementation_that_keeps_the_protocol():
    assert sorted(_engine_raw()) == sorted(ENGINE_TYPES)
    for name, cls in ENGINE_TYPES.items():
        engine = load_engine(name)
        assert type(engine) is cls and isinstance(engine, Engine)
        assert engine.name == name and hash(engine) == hash(load_engine(name.upper()))


def test_an_unknown_key_in_an_entry_is_refused():
    entry = {**_engine_raw()["vllm"], "gpu_memory_utilisation": 0.9}  # misspelt
    with pytest.raises(TypeError, match="gpu_memory_utilisation"):
        from_catalog("vllm", entry)


def test_an_unknown_engine_is_a_catalog_error_naming_the_known_ones():
    with pytest.raises(CatalogError) as err:
        load_engine("sglan")
    assert "sglang" in str(err.value)
    # an InputError's .allowed, read by callers that re-word the refusal (plan --current)
    assert err.value.allowed == ["sglang", "trtllm", "vllm"]
