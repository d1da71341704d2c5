"""Issue 30: a curve read in two halves (size once per deployment, rows once per step) is
``GemmCurve.at`` itself, to the last bit, on every measured curve of the catalog."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplan.catalog import load_gpu
from tokenplan.perf.gemm import fraction_at_point, row_point, size_read

# Every GPU of the catalog with measured tables (catalog/gemm_curves.json).
CURVES = [
    c
    for key in ("b200", "h200", "h100-sxm", "a100-80gb", "l40s", "rtx-pro-6000", "b300", "gb200")
    for c in load_gpu(key).gemm_curves
]


def test_the_catalog_has_curves_with_size_bands() -> None:
    assert CURVES and any(c.log_sizes for c in CURVES)


@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(0, 10_000),
    rows=st.floats(0.0, 1e6),
    size=st.one_of(st.none(), st.just(0.0), st.floats(1.0, 1e10)),
)
def test_two_half_read_equals_at(index: int, rows: float, size: float | None) -> None:
    curve = CURVES[index % len(CURVES)]
    point = row_point(curve, rows)
    assert fraction_at_point(size_read(curve, size), *point) == curve.at(rows, size or None)


def test_measured_points_and_band_centres_read_exactly() -> None:
    """On a measured M and a band centre the read is the stored figure (no interpolation)."""
    for curve in CURVES:
        for j, n in enumerate(curve.weight_elements):
            for i, m in enumerate(curve.rows):
                assert fraction_at_point(size_read(curve, n), *row_point(curve, m)) == curve.fraction_by_size[j][i]
