"""``plan --current … --measured-tok-s``: the founding question's measured setup (SGLang, TP4,
BF16, MTP k=3, 48 running on 4× RTX PRO 6000, ~1,600 tok/s) predicted beside its measurement,
the walk to the recommended setup, and the other option at the acceptance it implies.

The figures are checked against independent paths: the walk's last step against a plan searched
with τ stated at the implied per-position acceptance (``--spec mtp:K:TAU``), and the implied τ
against ``walk.acceptance_length``'s geometric sum.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.errors import InputError
from tokenplan.planning.walk import acceptance_length

CURRENT = "engine=sglang,tp=4,weight-dtype=bf16,spec=mtp:3,max-running=48"
GPUS = ("4xrtx-pro-6000", "8xb200")


@pytest.fixture(scope="module")
def answered() -> dict:
    return plan(PlanRequest(gpus=GPUS, current=CURRENT, measured_tok_s=1600)).to_json()


def test_current_setup_is_predicted_beside_the_measurement(answered):
    cur = answered["current"]
    start = cur["walk"][0]
    assert cur["option"] == "4× rtx-pro-6000"
    assert start["change"] == "start" and start["layout"] == "TP4"
    assert start["batch_per_replica"] == pytest.approx(48)  # the cap given, SGLang's default under MTP
    assert cur["measured_tok_s"] == 1600
    # the walk starts from the setup at the acceptance its measurement implies (as the plan is
    # searched), so its first row is the measurement, not the prior's prediction
    assert start["output_tok_s_total"] == pytest.approx(1600, rel=1e-3)
    assert cur["predicted_tok_s"] > 1600 * 1.2
    # τ that reproduces 1,600 lies in MTP k=3's range and is the geometric sum at the implied p
    assert 1.0 < cur["implied_tau"] < cur["predicted_tok_s"] and cur["implied_tau"] < 4.0
    assert acceptance_length(3, cur["implied_acceptance_per_position"]) == pytest.approx(cur["implied_tau"], rel=1e-6)
    assert any(
        line.startswith("What reproduces the measurement: an acceptance length τ = ") for line in answered["answer"]
    )


def test_the_setup_names_the_acceptance_its_prediction_used(answered):
    # The prediction is predict's for the same setup, τ at the job's context included: both said
    # 2,308 tok/s while the setup line named τ=2.952 (the prior up to 1,000 tokens of context) and
    # predict τ=2.63 (a new-user pass)
    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest
    from tokenplan.job.workload import DEFAULT_ISL, DEFAULT_OSL  # the plan's job, as the CLI's predict

    alone = predict(
        PredictRequest(
            model="qwen3.6-27b",
            gpu="rtx-pro-6000",
            num_gpus=4,
            tp=4,
            weight_dtype="bf16",
            kv_dtype="bf16",
            spec="mtp:3",
            max_running=48,
            isl=DEFAULT_ISL.mean,
            isl_sigma=DEFAULT_ISL.sigma,
            isl_cap=DEFAULT_ISL.cap,
            osl=DEFAULT_OSL.mean,
            osl_sigma=DEFAULT_OSL.sigma,
            osl_cap=DEFAULT_OSL.cap,
        )
    ).to_json()
    cur = answered["current"]
    assert cur["predicted_tok_s"] == pytest.approx(alone["output_tok_s_total"], rel=1e-9)
    assert alone["spec"] == "mtp k=3 τ=2.63" and "mtp k=3 τ=2.63," in cur["configuration"], cur["configuration"]


def test_walk_ends_where_a_plan_at_the_implied_acceptance_leads(answered):
    cur = answered["current"]
    p = cur["implied_acceptance_per_position"]
    specs = ("none",) + tuple(f"mtp:{k}:{acceptance_length(k, p):.3f}" for k in (1, 3))
    stated = plan(PlanRequest(gpus=GPUS, specs=specs)).to_json()
    rtx = next(o for o in stated["options"] if o["option"] == "4× rtx-pro-6000")
    assert cur["walk"][-1]["output_tok_s_total"] == pytest.approx(rtx["output_tok_s_total"], rel=1e-9)
    # the plan answered is the plan at that acceptance: every option's figures are the stated plan's
    for ours, theirs in zip(answered["options"], stated["options"]):
        assert (ours["option"], ours["best"], ours["output_tok_s_total"], ours["wall_days"]) == (
            theirs["option"],
            theirs["best"],
            theirs["output_tok_s_total"],
            theirs["wall_days"],
        )
    assert any(
        a.startswith("Every option is planned at the acceptance your measurement implies (p = ")
        for a in answered["answer"]
    )
    # each step changes one thing; gains multiply to the walk's total
    rates = [r["output_tok_s_total"] for r in cur["walk"]]
    total = 1.0
    for r in cur["walk"][1:]:
        total *= r["gain"]
    assert total == pytest.approx(rates[-1] / rates[0], rel=1e-9)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"current": "tp=x"}, "current 'tp=x' is not allowed (allowed: tp an integer ≥ 1)"),
        (
            {"current": "gpus=4"},
            "current 'gpus' is not allowed (allowed: attention-dp, disable-radix-cache, engine, "
            "ep, kv-dtype, max-running, memory-fraction, pp, spec, tp, weight-dtype)",
        ),
        (
            {"current": "tp=4", "deadline_s": 86400.0},
            "current 'tp=4' is not allowed (allowed: a plan of fixed GPU counts (leave out --deadline and --budget))",
        ),
        ({"current": "tp=4,tp=8"}, "current 'tp' is not allowed (allowed: each key once (it is given twice))"),
        (
            {"measured_tok_s": 1600.0},
            "measured-tok-s 1600 is not allowed (allowed: a figure with --current (the setup it was measured on))",
        ),
        (
            {"current": "tp=4", "measured_tok_s": -5.0},
            "measured-tok-s -5 is not allowed (allowed: a finite number of output tokens/s > 0)",
        ),
        # refused by the request's own checks: the entry as typed, not the request field
        # ("disable_radix_cache True", a break-it pass)
        (
            {"current": "engine=vllm,disable-radix-cache=true"},
            "current 'disable-radix-cache=true' is not allowed (allowed: only with engine=sglang; the engine is vllm)",
        ),
        # an engine not in the catalog: a CatalogError, which had no .allowed (a traceback,
        # AttributeError; new-user pass); the engines are the catalog's three
        (
            {"current": "engine=tgi", "measured_tok_s": 100.0},
            "current 'engine=tgi' is not allowed (allowed: sglang, trtllm, vllm)",
        ),
        (
            {"current": "weight-dtype=fp3"},
            "current 'weight-dtype=fp3' is not allowed (allowed: bf16, fp16, fp8, int8, mxfp8, nvfp4, mxfp4, w4a16)",
        ),
    ],
)
def test_bad_current_input_is_one_line(kwargs, message):
    with pytest.raises(InputError) as err:
        plan(PlanRequest(gpus=GPUS, **kwargs))
    assert str(err.value) == message


@pytest.mark.slow
def test_cli_prints_the_walk_table(tmp_path):
    code = "import sys; sys.argv[0] = 'tokenplan'; from tokenplan.cli import main; sys.exit(main())"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "plan",
            "--current",
            CURRENT,
            "--measured-tok-s",
            "1600",
            "--gpu",
            GPUS[0],
            "--gpu",
            GPUS[1],
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "From your setup to the recommended one · 4× rtx-pro-6000" in done.stdout
    assert "running cap 48 → raised" in done.stdout


def test_without_speculative_decoding_the_walk_starts_at_the_running_cap_that_reproduces_it():
    # A new user's --current engine=sglang,tp=4 (no MTP) with 1,600 tok/s measured: the walk's
    # gains came from the 3,082 prediction, not the measurement. It now starts at the running cap
    # that reproduces 1,600, as an MTP setup starts at its implied τ.
    cur = plan(PlanRequest(gpus=("4xrtx-pro-6000",), current="engine=sglang,tp=4", measured_tok_s=1600)).to_json()
    answer, cur = cur["answer"], cur["current"]
    cap, start = cur["implied_running_cap"], cur["walk"][0]
    assert cur["implied_tau"] is None and cap is not None and cap < cur["batch_per_replica"]
    assert start["batch_per_replica"] == pytest.approx(cap)  # the setup at that cap
    assert start["output_tok_s_total"] == pytest.approx(1600, rel=0.05)  # reproduces it (a whole cap)
    assert cur["walk"][1]["change"].startswith(f"running cap {cap} → ")
    last = cur["walk"][-1]["output_tok_s_total"]
    total = f"1,600 → {last:,.0f} tok/s ({last / 1600:.2f}×; steady state)."
    assert any(line.endswith(total) for line in answer), answer


def test_a_measurement_past_every_band_is_asked_for_its_unit():
    # 1,000,000 tok/s on 4× RTX PRO 6000 is hundreds of times the prediction, past the widest
    # rate band (1.6× above a prediction): the line asks whether the unit slipped; 1,600 does not.
    from tokenplan.planning.current import current_sentences
    from tokenplan.planning.results import CurrentSetup

    for measured, slip in ((1_000_000, True), (1_600, False)):
        got = plan(PlanRequest(gpus=("4xrtx-pro-6000",), current="engine=sglang,tp=4", measured_tok_s=measured))
        cur = got.current
        assert isinstance(cur, CurrentSetup)
        assert ("check the figure's unit" in current_sentences(cur)[0]) is slip


def test_a_prior_tau_is_walked_at_the_jobs_context_and_one_change_reads_one_change():
    # The setup runs what the plan recommends on 4× RTX PRO 6000 (TP1×DP4, FP8, MTP k=1 from the
    # prior) but for SGLang's default running cap. The walk showed a second step "speculative
    # decoding mtp k=1 τ=1.8 → mtp k=1 τ=1.73" at ×1.00 (the prior's default τ against the one at
    # the job's context, which both evaluations used) and said "2 changes"; it is one change.
    current = "engine=sglang,tp=1,weight-dtype=fp8,kv-dtype=fp8,spec=mtp:1"
    d = plan(PlanRequest(gpus=("4xrtx-pro-6000",), specs=("mtp:1",), current=current)).to_json()
    walk, tau = d["current"]["walk"], d["options"][0]["spec"].split("τ=")[1]
    assert [s["change"] for s in walk] == ["start", "running cap engine default → raised"]
    assert f"τ={tau}" in d["current"]["configuration"]  # the setup at the τ the plan used
    first, last = walk[0]["output_tok_s_total"], walk[-1]["output_tok_s_total"]
    assert any(f": 1 change, {first:,.0f} → {last:,.0f} tok/s" in line for line in d["answer"]), d["answer"]
