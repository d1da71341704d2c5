"""``catalog``: the shipped GPUs and models — the Python API behind ``tokenplan catalog``
(the listing and its types: :mod:`tokenplan.catalog.listing`)."""

from __future__ import annotations

from tokenplan.catalog import listing


def catalog_gpus() -> list[listing.CatalogGpu]:
    """Every catalog GPU (:class:`~tokenplan.catalog.listing.CatalogGpu`), in catalog order."""
    return listing.catalog_gpus()


def catalog_models() -> list[listing.CatalogModel]:
    """Every shipped model (:class:`~tokenplan.catalog.listing.CatalogModel`), in catalog order."""
    return listing.catalog_models()
