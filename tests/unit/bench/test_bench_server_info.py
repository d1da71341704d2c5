"""Prometheus parsing, snapshots, window arithmetic and the concurrency cap, on hand-made inputs."""

from __future__ import annotations

import math

from tokenplan.bench.server_info import (
    ServerSnapshot,
    WindowStats,
    concurrency_cap,
    parse_prometheus,
    snapshot_from_metrics,
)

VLLM_TEXT = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_running{engine="1",model_name="tiny"} 4.0
vllm:num_requests_waiting{engine="0",model_name="tiny"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:gpu_cache_usage_perc{engine="0",model_name="tiny"} 0.99
vllm:generation_tokens_total{engine="0",model_name="tiny"} 1500.0
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 9000
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="tiny"} NaN
garbage line without value
"""


def test_prometheus_values_are_summed_over_label_sets_and_comments_skipped():
    m = parse_prometheus(VLLM_TEXT)
    assert m["vllm:num_requests_running"] == 7.0  # 3 + 4 over two engine labels
    assert m["vllm:prompt_tokens_total"] == 9000.0
    assert "vllm:time_to_first_token_seconds_bucket" not in m  # NaN ignored


def test_snapshot_takes_the_first_spelling_present():
    snap = snapshot_from_metrics(parse_prometheus(VLLM_TEXT), 100.0)
    assert snap.running == 7.0 and snap.waiting == 2.0
    assert snap.kv_usage == 0.25  # the newer kv_cache_usage_perc wins over gpu_cache_usage_perc
    assert snap.preemptions is None  # not exposed here
    sglang = snapshot_from_metrics(
        {
            "sglang:num_running_reqs": 5.0,
            "sglang:num_queue_reqs": 1.0,
            "sglang:token_usage": 0.5,
            "sglang:generation_tokens_total": 10.0,
        },
        0.0,
    )
    assert (sglang.running, sglang.waiting, sglang.kv_usage, sglang.generation_tokens) == (5.0, 1.0, 0.5, 10.0)


def _snap(t, running, waiting, gen, kv=0.1, pre=0.0):
    return ServerSnapshot(t, running, waiting, kv, pre, gen, 0.0)


def test_window_rate_is_token_delta_over_time_delta():
    stats = WindowStats(
        _snap(10.0, 0, 0, 1000.0, pre=2.0),
        _snap(14.0, 0, 0, 3000.0, pre=5.0),
        [_snap(11.0, 8, 0, 0.0, kv=0.2), _snap(12.0, 8, 4, 0.0, kv=0.6), _snap(13.0, 6, 2, 0.0)],
    )
    d = stats.to_dict()
    assert d["generation_tokens"] == 2000.0
    assert d["output_tok_s"] == 500.0  # 2000 tokens / (14 − 10) s
    assert d["preemptions"] == 3.0
    assert math.isclose(d["running_mean"], 22 / 3) and d["running_max"] == 8
    assert d["waiting_mean"] == 2.0 and d["waiting_max"] == 4
    assert d["kv_usage_max"] == 0.6
    # waiting 0, 4, 2: the snapshots after the first with a request waiting are the last two
    assert (d["samples"], d["queued_samples"]) == (3, 2)


def test_the_first_snapshot_of_a_level_is_no_evidence_of_a_queue():
    # read as the level's requests arrive: 2 waiting then, none in the two snapshots after it
    arrived = WindowStats(None, None, [_snap(0.0, 1, 2, 0.0), _snap(0.5, 4, 0, 0.0), _snap(1.0, 4, 0, 0.0)])
    assert (arrived.to_dict()["samples"], arrived.to_dict()["queued_samples"]) == (3, 0)
    # a server that reports no waiting count: no evidence either way
    unknown = WindowStats(None, None, [_snap(0.0, 1, None, 0.0), _snap(0.5, 4, None, 0.0)])
    assert unknown.to_dict()["queued_samples"] is None


def _level(c, tok_s, running_max=None, waiting_mean=None, samples=10, queued_samples=9):
    """A level dict; with ``running_max``, metrics read ``samples`` times, with requests waiting in
    ``queued_samples`` of the snapshots after the first (by default a level long enough to tell)."""
    server = (
        None
        if running_max is None
        else {
            "running_max": running_max,
            "waiting_mean": waiting_mean,
            "samples": samples,
            "queued_samples": queued_samples,
        }
    )
    return {"concurrency": c, "output_tok_s": tok_s, "requests": 10, "server": server}


def test_cap_is_where_throughput_flattens_and_the_queue_grows():
    # 1→4: ×3.6, 4→16: ×3.3, 16→64: +5 % (< 10 %): flat from 16; waiting only at 64, running ≤ 24
    levels = [_level(1, 100, 1, 0.0), _level(4, 360, 4, 0.0), _level(16, 1200, 16, 0.1), _level(64, 1260, 24, 40.0)]
    cap = concurrency_cap(levels)
    assert cap["flattens_at_concurrency"] == 16
    assert cap["saturated_output_tok_s"] == 1260
    assert cap["queue_grows_at_concurrency"] == 64
    assert cap["max_running_requests"] == 24
    assert cap["source"] == "metrics"


def test_open_loop_levels_do_not_flatten_along_their_sent_requests():
    # two open-loop rates, each sending 20 requests ("concurrency" 20): 130 then 66 tok/s is the
    # rate falling from 40 to 20 req/s, not throughput flattening at 20 in flight
    rates = [_level(20, 130) | {"request_rate": 40.0}, _level(20, 66) | {"request_rate": 20.0}]
    cap = concurrency_cap(rates)
    assert cap["flattens_at_concurrency"] is None and cap["source"] is None
    # closed-loop levels ("inf", as vLLM writes it) flatten as before: 700 → 720 is +2.9 % (< 10 %)
    assert concurrency_cap([_level(8, 700) | {"request_rate": "inf"}, _level(32, 720)])["flattens_at_concurrency"] == 8


def test_cap_without_metrics_comes_from_throughput_only():
    cap = concurrency_cap([_level(1, 100), _level(8, 700), _level(32, 720)])
    assert cap["flattens_at_concurrency"] == 8 and cap["max_running_requests"] is None
    assert cap["source"] == "throughput"
    none = concurrency_cap([_level(1, 100), _level(8, 700)])
    assert none["flattens_at_concurrency"] is None and none["source"] is None
    # new-user finding: transformers serve gave 29, 36, 39, 77 tok/s at 1, 4, 16, 64 in flight and
    # the cap read "flattens at 4" (39 is 8 % over 36); 77 at 64 is 97 % over 39: no flat level
    rising = concurrency_cap([_level(1, 29), _level(4, 36), _level(16, 39), _level(64, 77)])
    assert rising["flattens_at_concurrency"] is None
    # a dip then a plateau: flat where nothing later beats the level by 10 % (700 → 650, 720: at 8)
    assert (
        concurrency_cap([_level(1, 100), _level(8, 700), _level(16, 650), _level(32, 720)])["flattens_at_concurrency"]
        == 8
    )


def test_waiting_at_a_level_the_server_ran_in_full_is_admission_latency_not_a_cap():
    # At 8 in flight the server ran all 8 at once (running_max 8) though 0.75 waited on average
    # (arrivals between steps): no queue there; at 64 it ran at most 32 while 25 waited: the cap.
    levels = [_level(1, 90, 1, 0.0), _level(8, 660, 8, 0.75), _level(32, 1940, 32, 0.6), _level(64, 1980, 32, 25.0)]
    cap = concurrency_cap(levels)
    assert (cap["queue_grows_at_concurrency"], cap["max_running_requests"]) == (64, 32)


DP8_TEXT = "".join(
    f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="m"}} 0.9\n'
    f'vllm:num_requests_running{{engine="{e}",model_name="m"}} 16\n'
    f'vllm:generation_tokens_total{{engine="{e}",model_name="m"}} 1000\n'
    for e in range(8)
)


def test_data_parallel_engines_fractions_take_the_max_counts_and_counters_the_sum():
    # vLLM --data-parallel-size 8: every engine at 0.9 KV usage is 0.9, not 7.2
    snap = snapshot_from_metrics(
        parse_prometheus(
            "# TYPE vllm:kv_cache_usage_perc gauge\n# TYPE vllm:num_requests_running gauge\n"
            "# TYPE vllm:generation_tokens counter\n" + DP8_TEXT
        ),
        0.0,
    )
    assert snap.kv_usage == 0.9 and math.isclose(snap.kv_usage_mean, 0.9)
    assert snap.running == 8 * 16 and snap.generation_tokens == 8 * 1000


def test_uneven_engines_max_and_mean_differ():
    m = parse_prometheus('vllm:kv_cache_usage_perc{engine="0"} 0.2\nvllm:kv_cache_usage_perc{engine="1"} 0.6\n')
    assert m["vllm:kv_cache_usage_perc"] == 0.6 and math.isclose(m["vllm:kv_cache_usage_perc:mean"], 0.4)


def test_a_server_one_short_of_its_level_while_an_arrival_waits_is_not_capped_there():
    # Cap 32: at 32 in flight a late resubmission leaves 31 running and one waiting (31 ≥ 0.9 × 32
    # = 28.8: not a cap); at 64 the surplus waits and 32 < 0.9 × 64 = 57.6 run: the cap.
    levels = [_level(1, 100, 1, 0.0), _level(32, 2000, 31, 0.8), _level(64, 2050, 32, 30.0)]
    cap = concurrency_cap(levels)
    assert cap["queue_grows_at_concurrency"] == 64 and cap["max_running_requests"] == 32


def test_a_sparse_sample_at_the_cap_with_one_arrival_waiting_is_not_a_queue():
    # The CI failure of 2026-12-03: cap 32, a starved machine's few metric samples at 32 in flight
    # saw at most 28 running (< 0.9 × 32 = 28.8) and 0.6 waiting on average. A queue at a cap
    # holds the level's surplus; 0.6 < 0.1 × 32 = 3.2 waiting is admission lag. At 64: 25 waiting
    # > 6.4 and 32 < 57.6 running: the cap is found there.
    levels = [_level(1, 100, 1, 0.0), _level(32, 1900, 28, 0.6), _level(64, 1980, 32, 25.0)]
    cap = concurrency_cap(levels)
    assert (cap["queue_grows_at_concurrency"], cap["max_running_requests"]) == (64, 32)


def test_a_starved_level_below_what_the_server_ran_elsewhere_is_not_capped():
    # The CI failure of stop 45: cap 32, at 32 in flight a starved client kept the server at no
    # more than 28 running (< 0.9 × 32 = 28.8) while 4 waited (> 3.2); at 64 it ran 32. The server
    # ran 32 at once in this sweep, and 32 ≥ 28.8, so the 32 level could have run whole: lag, not
    # a queue. At 64: 32 < 0.9 × 64 = 57.6 and 25 waiting > 6.4: the cap.
    levels = [_level(1, 100, 1, 0.0), _level(32, 1800, 28, 4.0), _level(64, 1980, 32, 25.0)]
    cap = concurrency_cap(levels)
    assert (cap["queue_grows_at_concurrency"], cap["max_running_requests"]) == (64, 32)
    # A sweep that ends at 32 shows nothing above 28: the queue there is the only evidence.
    cap = concurrency_cap(levels[:2])
    assert (cap["queue_grows_at_concurrency"], cap["max_running_requests"]) == (32, 28)


def test_a_queue_seen_in_fewer_than_two_snapshots_after_the_first_is_no_cap():
    # A break-it pass, 1 run in 8: a server capped at 16, levels of 0.2 and 0.11 s at 2 and 4 in
    # flight, one snapshot each (the 0.5 s interval); the 4 level's, read as its requests arrived,
    # had 1 running and 2 waiting. The cap line said "queue grows at 4, server runs at most 1 (from
    # metrics)" and --fit used 1. The mean rule passes there (2 > max(0.5, 0.4); 1 < 0.9 × 4), the
    # evidence does not: no snapshot after the first.
    levels = [_level(2, 80, 0.0, 0.0, samples=1, queued_samples=None), _level(4, 150, 1.0, 2.0, 1, None)]
    cap = concurrency_cap(levels)
    assert (cap["queue_grows_at_concurrency"], cap["max_running_requests"], cap["source"]) == (None, None, None)
    # three snapshots, the queue in one after the first: not yet; in two (it lasted ≥ 0.5 s): the cap
    for queued, found in ((1, (None, None, None)), (2, (4, 1, "metrics"))):
        levels[1] = _level(4, 150, 1.0, 2.0, samples=3, queued_samples=queued)
        cap = concurrency_cap(levels)
        assert (cap["queue_grows_at_concurrency"], cap["max_running_requests"], cap["source"]) == found
