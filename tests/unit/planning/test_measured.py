"""planning.measured: an unmeasured leader gives way to the fastest measured configuration.

The candidates here are stand-ins with only what ``measured_first`` and ``unmeasured`` read (a
candidate's ``evaluation``; an evaluation's ``config.layout.pp`` and ``warnings``), so the rule is
checked apart from any figure of the performance model.
"""

from __future__ import annotations

from types import SimpleNamespace

from tokenplan.job.evaluate import VLLM_HYBRID_SPEC_CAVEAT
from tokenplan.planning.measured import measured_first, unmeasured


def _ev(name: str, pp: int = 1, spec_caveat: bool = False) -> SimpleNamespace:
    warnings = (VLLM_HYBRID_SPEC_CAVEAT,) if spec_caveat else ()
    return SimpleNamespace(name=name, config=SimpleNamespace(layout=SimpleNamespace(pp=pp)), warnings=warnings)


def _c(ev: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(evaluation=ev)


def _names(ranked: list) -> list[str]:
    return [c.evaluation.name for c in ranked]


def test_unmeasured_reads_the_pipeline_and_the_speculative_regime_apart():
    pp2, mtp = _ev("pp2", pp=2), _ev("mtp", spec_caveat=True)
    assert unmeasured(pp2, spec_measured=False, pipeline_measured=False)
    assert not unmeasured(pp2, spec_measured=False, pipeline_measured=True)  # TensorRT-LLM: PP rows in the fit
    assert unmeasured(mtp, spec_measured=False, pipeline_measured=True)
    assert not unmeasured(mtp, spec_measured=True, pipeline_measured=False)  # the user measured it (--current)
    assert not unmeasured(_ev("dp8"), spec_measured=False, pipeline_measured=False)


def test_a_pipeline_leader_gives_way_to_the_first_measured_candidate_and_stays_in_the_list():
    def is_unmeasured(ev):
        return unmeasured(ev, spec_measured=False, pipeline_measured=False)

    ranked = [_c(_ev("pp2", pp=2)), _c(_ev("pp4", pp=4)), _c(_ev("dp8")), _c(_ev("tp2"))]
    out = measured_first(ranked, [], lambda ev: _c(ev), is_unmeasured)
    assert _names(out) == ["dp8", "pp2", "pp4", "tp2"]
    # a measured leader: the ranking stands
    assert _names(measured_first(ranked[2:], [], lambda ev: _c(ev), is_unmeasured)) == ["dp8", "tp2"]


def test_with_no_measured_leader_the_fastest_measured_run_is_simulated_and_put_first():
    def is_unmeasured(ev):
        return unmeasured(ev, spec_measured=False, pipeline_measured=False)

    ranked = [_c(_ev("pp2", pp=2)), _c(_ev("pp2-mtp", pp=2, spec_caveat=True))]
    # runs: fastest first in the steady state; the PP and the caveated MTP ones are passed over
    runs = [_ev("pp2", pp=2), _ev("mtp", spec_caveat=True), _ev("dp4"), _ev("tp2")]
    simulated: list[str] = []

    def simulate(ev):
        simulated.append(ev.name)
        return _c(ev)

    assert _names(measured_first(ranked, runs, simulate, is_unmeasured)) == ["dp4", "pp2", "pp2-mtp"]
    assert simulated == ["dp4"]
    # nothing measured runs at all (--pp 2 fixed): the ranking stands, nothing simulated
    simulated.clear()
    assert _names(measured_first(ranked, runs[:2], simulate, is_unmeasured)) == ["pp2", "pp2-mtp"]
    assert simulated == []
