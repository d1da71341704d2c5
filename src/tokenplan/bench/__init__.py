"""``tokenplan bench``'s measuring half (I/O column, beside ``client`` and ``runner``).

- :mod:`tokenplan.bench.measure` — a sweep from what was asked to the bench JSON: the checks, clients, probe and sweep;
- :mod:`tokenplan.bench.workload` — random prompts of exact token counts, or dataset prompts;
- :mod:`tokenplan.bench.probe` — the servers asked before the sweep: model served, ignore_eos, prompts;
- :mod:`tokenplan.bench.sweep` — concurrency levels with warm-up and measured windows;
- :mod:`tokenplan.bench.levels` — one measured level and its figures in the bench JSON;
- :mod:`tokenplan.bench.server_info` — ``/metrics`` and ``/get_server_info`` readers, the
  concurrency cap a sweep reveals;
- :mod:`tokenplan.bench.http` — small side requests with the standard library.

Nothing here knows the performance model; the fit lives in ``tokenplan.calibration.run_profile``
and meets this package in ``tokenplan.api.bench``.
"""
