"""``generate --backend ray`` on a local Ray cluster against the fault-injecting server.

Opt-in (Ray is an extra, and a cluster takes ~10–20 s to start on a loaded 2-core machine)::

    pip install 'tokenplan[ray]' pytest     # all these tests import; the report step also uses [report]
    TOKENPLAN_RAY_TESTS=1 python -m pytest -q -m ray tests/integration/test_generate_ray.py

One head node (``ray start --head --block``, 2 CPUs) serves every test of the module; each run is
a driver subprocess joining it with ``ray_address``, so killing a driver leaves the cluster up.
The fault server's answer is a pure function of the request (tests/support/fault_server.py), so
every stored turn is checked against the answer recomputed here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TOKENPLAN_RAY_TESTS") != "1", reason="opt-in: TOKENPLAN_RAY_TESTS=1 (needs tokenplan[ray])"
    ),
]

RUNNER = """
import json, sys
from tokenplan.api.generate import GenerateRequest, generate
result = generate(GenerateRequest.build(**json.loads(sys.argv[1])), on_warning=lambda t: print(t, file=sys.stderr))
print(json.dumps({"stored": result.stored, "interrupted": result.interrupted, "ok": result.accounting_ok,
                  "duplicates": result.duplicate_records, "errors": result.errors}))
"""


# The `ray` script installed beside this interpreter (a venv's bin/), so the tests run the Ray they
# import even when the venv is not activated and another `ray` is on PATH.
RAY_CLI = str(Path(sys.executable).with_name("ray"))


def _stats(url: str) -> dict:
    """The fault server's ``GET /stats`` (urllib: the Ray tests import only what tokenplan[ray] installs)."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=30) as answer:
        return json.loads(answer.read())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory):
    """A 2-CPU Ray head node; yields its address. Ready when ``ray status`` answers."""
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": _pythonpath()}
    log = open(tmp_path_factory.mktemp("ray") / "head.log", "w")
    head = subprocess.Popen(
        [
            RAY_CLI,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while subprocess.run([RAY_CLI, "status", "--address", address], capture_output=True, env=env).returncode != 0:
        assert head.poll() is None and time.monotonic() < deadline, "the Ray head did not start"
    yield address
    head.send_signal(signal.SIGTERM)  # --block: stops the raylet, GCS and workers it started
    try:
        head.wait(60)
    except subprocess.TimeoutExpired:
        head.kill()
    log.close()


def _pythonpath() -> str:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])


def _start(options: dict) -> subprocess.Popen[str]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": _pythonpath()}
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(options: dict, timeout_s: float = 300) -> dict:
    proc = _start(options)
    out, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _input(path: Path, rows: int) -> Path:
    rng = random.Random(7)
    with path.open("w") as fh:
        for i in range(rows):
            if i % 3 == 0:  # two user turns → two requests, the second over the first answer
                fh.write(
                    json.dumps(
                        {
                            "id": f"c{i}",
                            "conversations": [
                                {"role": "user", "content": f"q{i} " + "x" * rng.randint(0, 400)},
                                {"role": "assistant", "content": "old"},
                                {"role": "user", "content": f"again {i}"},
                            ],
                        }
                    )
                    + "\n"
                )
            else:
                fh.write(json.dumps({"id": f"p{i}", "prompt": f"prompt {i} " + "y" * rng.randint(0, 2000)}) + "\n")
    return path


def _ray_job(data: Path, run_dir: Path, endpoints: list[str], ray_head: str, **more: object) -> dict:
    """A Ray run's options over ``data`` into ``run_dir`` (the fault server's model, 2 actors,
    4 in flight per endpoint), with ``more`` added or replacing them."""
    return {
        "inputs": [str(data)],
        "out_dir": str(run_dir),
        "endpoints": endpoints,
        "model": "fault-model",
        "concurrency": 4,
        "backend": "ray",
        "actors": 2,
        "ray_address": ray_head,
        **more,
    }


def _expected_ids(rows: int) -> set[str]:
    return {f"c{i}" if i % 3 == 0 else f"p{i}" for i in range(rows)}


def _expected_reply(messages: list[dict]) -> str:
    prompt = [{"role": m["role"], "content": m["content"]} for m in messages]
    return "reply-" + hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:12]


def _records(run_dir: Path) -> list[dict]:
    return [
        json.loads(line)
        for shard in sorted((run_dir / "shards").glob("part-*.jsonl"))
        for line in shard.read_text().splitlines()
    ]


def _check_answers(records: list[dict]) -> None:
    for record in records:
        conversation = record["conversations"]
        for i, message in enumerate(conversation):
            if message["role"] == "assistant":
                assert message["content"] == _expected_reply(conversation[:i]), record["id"]


def _actor_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read().startswith(b"ray::GenerateActor"):
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def _lines(run_dir: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in (run_dir / "shards").glob("part-*.jsonl"))


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_parity_with_the_local_backend(tmp_path: Path, ray_head: str) -> None:
    rows = 300
    data = _input(tmp_path / "in.jsonl", rows)
    with FaultServerProcess(str(tmp_path), delay_s=0.01, tokens=8) as server:
        base = {"inputs": [str(data)], "endpoints": [server.url], "model": "fault-model", "concurrency": 8}
        local = _finish({**base, "out_dir": str(tmp_path / "local")})
        on_ray = _finish(
            {**base, "out_dir": str(tmp_path / "ray"), "backend": "ray", "actors": 2, "ray_address": ray_head}
        )
    assert local == on_ray == {"stored": rows, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}

    def answers(run: str) -> dict[str, list]:
        return {
            r["id"]: [(m["role"], m["content"], m.get("reasoning_content")) for m in r["conversations"]]
            for r in _records(tmp_path / run)
        }

    assert answers("ray") == answers("local") and set(answers("ray")) == _expected_ids(rows)


def test_a_ray_run_directory_is_read_by_a_local_resume_export_and_report(tmp_path: Path, ray_head: str) -> None:
    rows = 120
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), delay_s=0.01, tokens=8) as server:
        base = {
            "inputs": [str(data)],
            "endpoints": [server.url],
            "model": "fault-model",
            "concurrency": 8,
            "out_dir": str(run_dir),
        }
        assert _finish({**base, "backend": "ray", "ray_address": ray_head})["stored"] == rows
        stats_before = _stats(server.url)
        # The local backend resumes it: nothing left to send, accounting ok, and --export works.
        local = _finish({**base, "export": str(tmp_path / "out.parquet")})
        stats_after = _stats(server.url)
    assert local == {"stored": rows, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}
    # The server counts every request: the local run's health check (GET /models) and the second
    # GET /stats — no chat completion was sent.
    assert stats_after["requests"] - stats_before["requests"] == 2
    import pyarrow.parquet as pq

    assert sorted(pq.read_table(tmp_path / "out.parquet")["id"].to_pylist()) == sorted(_expected_ids(rows))
    report = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tokenplan.cli import main; main()",
            "report",
            str(run_dir),
            "-o",
            str(tmp_path / "report.html"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
        timeout=120,
    )
    if importlib.util.find_spec("plotly") is None:
        # The HTML report needs tokenplan[report], which tokenplan[ray] does not install: one line
        # naming the extra, a non-zero exit, no traceback (the project's rule for a missing extra).
        assert report.returncode != 0 and "tokenplan[report]" in report.stderr, report.stderr
        assert len(report.stderr.strip().splitlines()) == 1 and "Traceback" not in report.stderr
        return
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.html").stat().st_size > 0


def test_kills_of_driver_and_actors_and_a_server_restart_store_every_id_exactly_once(
    tmp_path: Path, ray_head: str
) -> None:
    rows, rng = 1500, random.Random(2026)
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), p500=0.03, p429=0.03, pdrop=0.02, delay_s=0.2, tokens=8) as server:
        options = {
            "inputs": [str(data)],
            "out_dir": str(run_dir),
            "endpoints": [server.url],
            "model": "fault-model",
            "concurrency": 4,
            "max_attempts": 30,
            "retry_base_delay_s": 0.01,
            "probe_interval_s": 0.2,
            "shard_max_bytes": 100_000,
            "backend": "ray",
            "actors": 2,
            "ray_address": ray_head,
        }
        actor_kills, lines_after_kill = 0, []
        for k in range(6):  # six drivers killed with SIGKILL
            before = _lines(run_dir) if run_dir.exists() else 0
            proc = _start(options)
            # Mid-run: actors are up and have stored something in this run.
            _wait_for(
                lambda: run_dir.exists() and _lines(run_dir) > before + 5 or proc.poll() is not None,
                120,
                "no progress after the driver started",
            )
            assert proc.poll() is None, proc.communicate()[1]
            if k in (0, 2, 4):  # one actor process killed mid-run: its share goes to a replacement
                pid = rng.choice(_actor_pids())
                os.kill(pid, signal.SIGKILL)
                actor_kills += 1
                mark = _lines(run_dir)
                _wait_for(lambda: _lines(run_dir) > mark + 5, 120, "no progress after an actor was killed")
            if k == 3:
                server.restart()  # the server dies and comes back while the actors are sending
            time.sleep(rng.uniform(0.0, 3.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            lines_after_kill.append(_lines(run_dir))
        # The last run finishes; one of its actors is killed too, and a replacement takes its units.
        before = _lines(run_dir)
        last = _start({**options, "concurrency": 8})  # not part of the job's identity
        _wait_for(lambda: _lines(run_dir) > before + 5 or last.poll() is not None, 120, "no progress")
        os.kill(rng.choice(_actor_pids()), signal.SIGKILL)
        out, err = last.communicate(timeout=300)
    assert last.returncode == 0, err
    assert "died;" in err and "replaces it over the same endpoints" in err, err  # the driver's note
    final = json.loads(out.strip().splitlines()[-1])
    assert final == {"stored": rows, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}
    assert actor_kills == 3 and lines_after_kill[-1] < rows, lines_after_kill
    records = _records(run_dir)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == rows and set(ids) == _expected_ids(rows)
    _check_answers(records)
    assert json.loads((run_dir / "manifest.json").read_text())["epoch"] == 7  # six killed runs + the last


def test_a_frozen_driver_keeps_the_directory_and_a_killed_one_leaves_no_duplicates(
    tmp_path: Path, ray_head: str
) -> None:
    """A frozen driver (SIGSTOP) still holds the run lock: a second run is refused. Once it is
    killed, its actors may still be finishing requests while the resumed run starts: the epoch
    fence keeps them from writing (the fence on a live actor: the test after the next)."""
    rows = 600
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), delay_s=0.5, tokens=8) as server:
        options = {
            "inputs": [str(data)],
            "out_dir": str(run_dir),
            "endpoints": [server.url],
            "model": "fault-model",
            "concurrency": 16,
            "backend": "ray",
            "actors": 2,
            "ray_address": ray_head,
        }
        old = _start(options)
        _wait_for(lambda: run_dir.exists() and _lines(run_dir) > 20, 120, "the first run made no progress")
        old.send_signal(signal.SIGSTOP)
        refused = _start(options)
        _, err = refused.communicate(timeout=120)
        assert refused.returncode != 0 and "in use by another tokenplan generate" in err, err
        old.kill()
        old.wait()
        resumed = _start(options)
        out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["ok"] is True
    ids = [r["id"] for r in _records(run_dir)]
    assert len(ids) == len(set(ids)) == rows


def test_sixteen_endpoints_are_all_used_by_four_actors(tmp_path: Path, ray_head: str) -> None:
    rows = 400
    data = _input(tmp_path / "in.jsonl", rows)
    servers = [FaultServerProcess(str(tmp_path), tokens=4) for _ in range(16)]
    try:
        result = _finish(
            {
                "inputs": [str(data)],
                "out_dir": str(tmp_path / "run"),
                "endpoints": [s.url for s in servers],
                "model": "fault-model",
                "concurrency": 2,
                "backend": "ray",
                "actors": 4,
                "ray_address": ray_head,
            }
        )
    finally:
        for server in servers:
            server.stop()
    assert result["ok"] and result["stored"] == rows
    used = {turn["endpoint"] for r in _records(tmp_path / "run") for turn in r["turns"]}
    assert used == {s.url for s in servers}
    # summary.json's requests per endpoint, summed over the actors' reports, are the stored turns'
    # (a request per turn; some rows hold several user turns, so more requests than rows)
    by_records = Counter(turn["endpoint"] for r in _records(tmp_path / "run") for turn in r["turns"])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    served = {e["endpoint"]: e["requests_answered"] for e in summary["this_invocation"]["endpoints"]}
    assert served == dict(by_records) and sum(served.values()) > rows
    actors = {p.name.split("-")[2] for p in (tmp_path / "run" / "shards").glob("part-0001-*.jsonl") if p.stat().st_size}
    assert len(actors) == 4  # every actor stored records


def test_an_actor_whose_endpoints_are_down_gets_no_units_and_the_run_finishes(tmp_path: Path, ray_head: str) -> None:
    rows = 200
    data = _input(tmp_path / "in.jsonl", rows)
    dead = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    with FaultServerProcess(str(tmp_path), delay_s=0.01, tokens=4) as server:
        proc = _start(
            {
                "inputs": [str(data)],
                "out_dir": str(tmp_path / "run"),
                "endpoints": [server.url, dead],
                "model": "fault-model",
                "concurrency": 8,
                "backend": "ray",
                "actors": 2,
                "ray_address": ray_head,
                "probe_interval_s": 0.5,
            }
        )
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    # Actor 1 holds only the dead endpoint: the local backend would eject it and carry on; so must this.
    assert result == {"stored": rows, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}
    # and say so, as the local backend does (a break-it pass: Ray said nothing and reported [ok])
    assert f"1 of 2 endpoints not used until a probe finds them serving 'fault-model': {dead} (transport" in err
    assert {turn["endpoint"] for r in _records(tmp_path / "run") for turn in r["turns"]} == {server.url}


def test_refused_rows_are_skipped_once_and_count_as_done(tmp_path: Path, ray_head: str) -> None:
    rows = 200
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), p400=0.2, tokens=4) as server:
        base = _ray_job(data, run_dir, [server.url], ray_head, concurrency=8)
        first = _finish(base)
        again = _finish(base)  # a skipped unit is done: nothing is sent again
    skipped = [json.loads(line) for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    stored = {r["id"] for r in _records(run_dir)}
    # 400 answers are not retried: each refused unit is skipped once, with its status.
    assert skipped and all(r["reason"] == "refused" and r["status"] == 400 for r in skipped)
    assert len({r["id"] for r in skipped}) == len(skipped) and not stored & {r["id"] for r in skipped}
    assert len(stored) + len(skipped) == rows
    assert first["ok"] and first["stored"] == len(stored) and again == first


def test_units_whose_tries_run_out_go_to_errors_and_the_run_ends(tmp_path: Path, ray_head: str) -> None:
    # 30 % HTTP 500 and one try per unit: about a third of the units fail. Each goes to
    # errors.jsonl (sent again by the next run) and the run ends; a refactor had dropped the
    # driver's write of them, so they stayed assigned and the run never ended (a break-it pass).
    rows = 40
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    base = _ray_job(data, run_dir, [], ray_head, actors=1, max_attempts=1)
    (tmp_path / "a").mkdir()
    with FaultServerProcess(str(tmp_path / "a"), p500=0.3, seed=3, tokens=4) as flaky:
        first = _finish({**base, "endpoints": [flaky.url]}, timeout_s=240)
    errors = (run_dir / "errors.jsonl").read_text().splitlines()
    assert first["errors"] > 0 and first["stored"] + first["errors"] == rows and len(errors) == first["errors"]
    (tmp_path / "b").mkdir()
    with FaultServerProcess(str(tmp_path / "b"), tokens=4) as healthy:
        again = _finish({**base, "endpoints": [healthy.url]}, timeout_s=240)
    assert again == {"stored": rows, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}


def test_a_server_that_refuses_every_request_ends_the_run_and_marks_nothing_final(
    tmp_path: Path, ray_head: str
) -> None:
    # The server refuses `seed`, which every request carries: a configuration error, not 60 rows'
    # fate. Before, each actor wrote each 400 as skipped at once and the run ended [ok] with all
    # 60 rows skipped for good. Now the driver judges every actor's refusals as the local backend
    # does: the run fails naming the refusal, skipped.jsonl stays empty, errors.jsonl holds the
    # refused units (sent again), and the rerun without seed stores all 60.
    rows = 60
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), reject_seed=1, tokens=4) as server:
        base = _ray_job(data, run_dir, [server.url], ray_head)
        proc = _start(base)
        _, err = proc.communicate(timeout=300)
        # 8 refusals start the driver's control request (refused too); the actors' units in
        # flight meanwhile join them
        assert proc.returncode != 0 and re.search(r"refused \d+ rows in a row with 400", err), err
        assert "Unrecognized request argument supplied: seed" in err and "a short prompt with the same" in err, err
        skipped = run_dir / "skipped.jsonl"
        assert not skipped.exists() or skipped.read_text() == ""
        errors = [json.loads(line) for line in (run_dir / "errors.jsonl").read_text().splitlines()]
        assert len(errors) >= 8 and {e["status"] for e in errors} == {400}
        again = _finish({**base, "seed": None})
    assert again == {"stored": rows, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}


def test_a_server_that_withholds_every_answer_stops_a_ray_run_early(tmp_path: Path, ray_head: str) -> None:
    # content_filter on every request, the control's one-line prompt too ("e" is in every request's
    # JSON: the "content" key): each actor counts its own rows as the local backend does, asks
    # its endpoint after 8 with no answer between, and stops the run. Before, the actors left such
    # answers uncounted and all 80 rows went through every try to errors.jsonl.
    rows = 80
    data = _input(tmp_path / "in.jsonl", rows)
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), filter_word="e", tokens=4) as server:
        proc = _start(_ray_job(data, run_dir, [server.url], ray_head, max_attempts=1))
        _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0 and "no finished answer" in err and "nor to a short prompt" in err, err
    errors = (run_dir / "errors.jsonl").read_text().splitlines()
    # 2 actors × (8 rows of the streak + the 4 in flight each may hold while the control is out),
    # at most 24 of the 80; none stored or skipped (withheld answers are not final)
    assert 8 <= len(errors) <= 2 * (8 + 4), len(errors)
    assert not list((run_dir / "shards").glob("part-*.jsonl")) or not _records(run_dir)


def test_too_long_rows_at_the_start_of_a_sorted_file_are_skipped_after_the_driver_s_control_request(
    tmp_path: Path, ray_head: str
) -> None:
    # 12 rows over the served context first (the fault server counts len(messages JSON) // 4
    # tokens: "x" * 5,000 is over 1,250, + 16 > 1,000), then 48 short ones. The first 8 refusals
    # come before any answer: the driver sends the control request (a one-line prompt with the
    # job's settings), it is answered, and the refusals wait for the first answered row: skipped.
    rows = [{"id": f"l{i}", "prompt": "x" * 5000} for i in range(12)]
    rows += [{"id": f"s{i}", "prompt": f"short {i}"} for i in range(48)]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    with FaultServerProcess(str(tmp_path), context=1000, tokens=4) as server:
        result = _finish(_ray_job(data, run_dir, [server.url], ray_head, max_tokens=16))
    assert result == {"stored": 48, "interrupted": False, "ok": True, "duplicates": 0, "errors": 0}
    skipped = [json.loads(line) for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in skipped) == sorted(f"l{i}" for i in range(12))


def test_an_actor_stops_writing_the_moment_a_newer_epoch_begins(tmp_path: Path, ray_head: str) -> None:
    """The fence itself, on a real actor: it is writing when a newer run takes the epoch (as a
    resumed run does before it reads the done-set); from then on it writes nothing and says so."""
    import ray

    from tokenplan.client.endpoints import PoolSettings
    from tokenplan.client.retry import RetryPolicy
    from tokenplan.runner.input.rows import read_rows
    from tokenplan.runner.ray.actor import ActorConfig, GenerateActor
    from tokenplan.runner.requests import Sampling, work_units
    from tokenplan.runner.spec import JobSettings
    from tokenplan.runner.store.fencing import advance_epoch
    from tokenplan.runner.store.manifest import check_manifest

    data = _input(tmp_path / "in.jsonl", 400)
    run_dir = tmp_path / "run"
    (run_dir / "shards").mkdir(parents=True)
    check_manifest(run_dir, {"job": "fence test"}, force=False)
    epoch = advance_epoch(run_dir)
    units = [u for row in read_rows([data]) for u in work_units(row, 1)]
    job = JobSettings("fault-model", "regenerate", 1, "keep", 0, Sampling(8), False, RetryPolicy(3, 0.01), 30.0, 1.0)
    ray.init(address=ray_head, runtime_env={"env_vars": {"PYTHONPATH": _pythonpath()}})
    try:
        with FaultServerProcess(str(tmp_path), delay_s=0.2, tokens=4) as server:
            actor = ray.remote(num_cpus=0)(GenerateActor).remote(
                ActorConfig(run_dir, epoch, 0, (server.url,), PoolSettings(16), job, None, 1 << 20)
            )
            assert ray.get(actor.start.remote()) == (None, [])
            ray.get(actor.submit.remote(units))
            _wait_for(lambda: _lines(run_dir) >= 20, 60, "the actor stored nothing")
            advance_epoch(run_dir)  # a newer run begins while 16 requests are in flight
            at_epoch = _lines(run_dir)
            fenced = False
            deadline = time.monotonic() + 60
            while not fenced and time.monotonic() < deadline:
                fenced = ray.get(actor.poll.remote(0.5)).fenced
            time.sleep(1.0)  # the requests that were in flight have come back by now (0.2 s each)
            assert fenced and _lines(run_dir) == at_epoch
            ray.kill(actor)
    finally:
        ray.shutdown()
