"""``memory``: one GPU's memory breakdown — the Python API behind ``tokenplan memory``."""

from __future__ import annotations

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.evaluate import Rejection
from tokenplan.job.results import MemoryResult, Rejected, memory_result


def memory(req: PredictRequest) -> MemoryResult | Rejected:
    """Per-GPU memory breakdown of one configuration (:class:`~tokenplan.job.results.MemoryResult`),
    or :class:`~tokenplan.job.results.Rejected` with the reason it cannot run.

    Raises:
        InputError, CatalogError, ConfigError: bad names or sizes.
    """
    scenario = resolve(req)
    result = scenario.evaluate()
    if isinstance(result, Rejection):
        return Rejected(result.reason)
    return memory_result(result, scenario.isl, scenario.osl, req.isl + req.osl)
