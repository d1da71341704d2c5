"""``tokenplan bench``'s measuring half (I/O column, beside ``client`` and ``runner``).

- :mod:`tokenplan.bench.workload` — random prompts of exact token counts, or dataset prompts;
- :mod:`tokenplan.bench.sweep` — concurrency levels with warm-up, measured windows, the JSON levels;
- :mod:`tokenplan.bench.server_info` — ``/metrics`` and ``/get_server_info`` readers, the
  concurrency cap a sweep reveals;
- :mod:`tokenplan.bench.http` — small side requests with the standard library.

Nothing here knows the performance model; the fit lives in ``tokenplan.calibration.from_runs``
and meets this package in ``tokenplan.api.bench``.
"""
