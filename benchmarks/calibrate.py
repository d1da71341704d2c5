"""Time of the shipped refit: ``tokenplan calibrate`` with error bands on the three ground-truth files.

Runs ``calibrate(FILES, bands=True)`` once (the full fit, the leave-one-GPU-out and
leave-one-model-out refits, and the error-band folds of whole configurations) and prints its
wall time, the CPU seconds of this process and of its worker processes, the optimiser's
evaluations and the band coverage per file and measured quantity. With ``--compare-random`` it
then also refits the old folds of random rows (fold = row index mod 5) and prints, per file and
quantity, the nested coverage of each fold scheme and the share of the configuration-held-out
residuals that the random-row bands cover (what those bands give a configuration the fit never
saw).

Run:  python benchmarks/calibrate.py [--workers N] [--compare-random]
      python benchmarks/calibrate.py --short   # seconds: dev.csv alone, no cross-validation (CI's check
                                               # that the benchmark still runs; no figure is meant)

A report, not a test: wall time depends on the machine and its load (CPU seconds less so).
"""

from __future__ import annotations

import argparse
import resource
import time

FILES = ["data/ground-truth/dev.csv", "data/ground-truth/serving-dev.csv", "data/ground-truth/inferencex-dev.csv"]


def cpu_s() -> tuple[float, float]:
    """(CPU seconds of this process, of its finished children), user + system."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _pct(shares: dict[str, dict[str, float]]) -> str:
    return "; ".join(f"{f} " + ", ".join(f"{q} {v * 100:.1f} %" for q, v in by.items()) for f, by in shares.items())


def compare_random(result, workers: int) -> None:  # noqa: ANN001 - a CalibrationResult
    """Nested coverage of grouped and random-row folds, and random-row bands on grouped residuals."""
    from pathlib import Path

    from tokenplan.api.calibrate import read_cases
    from tokenplan.calibration.bands import covered, lookup_keys, quantile_bands
    from tokenplan.calibration.fit import FitOptions, fit
    from tokenplan.calibration.heldout import coverage_by_file, fold_refits, fold_residuals, grouped_folds
    from tokenplan.calibration.memo import PredictionMemo
    from tokenplan.calibration.parallel import run_refits
    from tokenplan.calibration.refit import BAND_FOLDS, BAND_MAX_NFEV, SERVING_FIT_STRIDE, subsample
    from tokenplan.perf.efficiency import Efficiency

    files, _ = read_cases(FILES)
    cases = subsample(files, SERVING_FIT_STRIDE)
    sources = {id(c): Path(p).name for p, _, rows in files for c in rows}
    memo = PredictionMemo()
    full = result.fit
    # one Jacobian at the full solution, so that every fold's first one is found in the memo
    fit(cases, start_x=full.x, options=FitOptions(max_nfev=1), memo=memo, workers=workers)
    options = FitOptions(max_nfev=BAND_MAX_NFEV)
    schemes = {"grouped": grouped_folds(cases, BAND_FOLDS), "random": [i % BAND_FOLDS for i in range(len(cases))]}
    held = {}
    for name, fold in schemes.items():
        refits = fold_refits(cases, fold, full, Efficiency(), options)
        held[name] = fold_residuals(refits, run_refits(refits, memo, workers), sources)
        print(f"{name} folds, nested coverage: {_pct(coverage_by_file(held[name]))}")
    bands = quantile_bands([h.residual for h in held["random"]])
    hits: dict[str, dict[str, list[bool]]] = {}
    for h in held["grouped"]:
        r = h.residual
        levels = bands[r.metric]
        key = next(k for k in lookup_keys(r.engine, r.architecture, r.family, r.batch, r.spec) if k in levels)
        hits.setdefault(r.source, {}).setdefault(r.quantity, []).append(covered(levels[key], r.log_error))
    shares = {f: {q: sum(v) / len(v) for q, v in sorted(by.items())} for f, by in sorted(hits.items())}
    print(f"random-row bands on configuration-held-out residuals: {_pct(shares)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=None, help="processes (default: the CPUs available)")
    parser.add_argument("--compare-random", action="store_true")
    parser.add_argument("--short", action="store_true", help="dev.csv alone, no cross-validation: seconds")
    args = parser.parse_args()
    from tokenplan.api.calibrate import calibrate
    from tokenplan.calibration.parallel import default_workers

    workers = args.workers or default_workers()
    if args.short:
        wall = time.perf_counter()
        f = calibrate(FILES[:1], cross_validation=False, workers=workers).fit
        print(
            f"calibrate --short (dev.csv, no cross-validation): {time.perf_counter() - wall:.1f} s, "
            f"{f.n_rows} rows, {f.nfev} evaluations"
        )
        return
    wall, (me, kids) = time.perf_counter(), cpu_s()
    result = calibrate(FILES, bands=True, workers=workers)
    wall = time.perf_counter() - wall
    me2, kids2 = cpu_s()
    f = result.fit
    print(
        f"calibrate, 3 files, bands, {workers} workers: wall {wall:.0f} s, CPU {me2 - me:.0f} s here "
        f"+ {kids2 - kids:.0f} s in workers; full fit {f.n_rows} rows, {f.nfev} evaluations, status {f.status}"
    )
    b = result.bands
    print(f"band coverage (nested, folds of whole configurations): {b.checked_coverage}; {_pct(b.coverage_by_file)}")
    if args.compare_random:
        compare_random(result, workers)


if __name__ == "__main__":
    main()
