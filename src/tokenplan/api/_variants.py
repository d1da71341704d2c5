"""Rows whose source names only a GPU family ("H100" without SXM, PCIe or NVL): the range of
predictions over the family's variants, which ``validate`` widens such a row's interval to.

A row with ``gpu_variant_stated = false`` is predicted on the variant its ``gpu`` column guesses
(usually the SXM part); the same configuration on the family's other catalog variants (keys
that share the part before the first ``-``: ``h100-sxm``, ``h100-pcie``, ``h100-nvl``) gives
what the figure would be had the run used one of those. The row is never scored as if the guess
were known: ``validate`` flags it and its 80 % interval spans every variant's interval.
"""

from __future__ import annotations

from dataclasses import replace

from tokenplan.api.resolve import resolve_case
from tokenplan.calibration.validate import RowResult, measured_pairs, predict_case
from tokenplan.catalog import gpu_names
from tokenplan.measurement import SkippedRow
from tokenplan.perf.efficiency import EfficiencyTable


def family_variants(gpu: str) -> list[str]:
    """Catalog GPU keys of ``gpu``'s family other than ``gpu`` itself (``h100-sxm`` →
    ``h100-nvl``, ``h100-pcie``), sorted; [] for a key without a family suffix."""
    if "-" not in gpu:
        return []
    family = gpu.split("-")[0]
    return sorted(k for k in gpu_names() if k != gpu and "-" in k and k.split("-")[0] == family)


def variant_range(r: RowResult, table: EfficiencyTable, metric: str) -> tuple[float, float] | None:
    """(lowest, highest) prediction of ``metric`` (``throughput``, ``tpot``, ``ttft``; tok/s per GPU
    or seconds) over the row's GPU and its family's variants, for a row whose source does not
    state the variant; None where it does or the row does not measure ``metric``. Variants that
    reject the configuration (e.g. it does not fit in their memory) are left out."""
    m = r.case.measurement
    if m.gpu_variant_stated or metric not in r.values:
        return None
    values = [r.values[metric][0]]
    for key in family_variants(m.gpu):
        case = resolve_case(replace(m, gpu=key))
        if isinstance(case, SkippedRow):
            continue
        p = predict_case(case, table.resolve(case.engine, case.architecture))
        if p.rejected is None and metric in (pairs := measured_pairs(case, p)):
            values.append(pairs[metric][0])
    return min(values), max(values)
