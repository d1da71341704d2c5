"""``calibrate`` keeps what it reads and what it replaces (from a break-it pass): an output path
that is one of its inputs, or the same file for the profile and the band table, is refused before
the fit; a failed write keeps the file that was there; a file named twice or a row id twice is
refused (its rows would be fitted twice); a refit whose rows identify no factor writes nothing
and fails, where it had written a profile of the defaults and exited 0."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from tests.support.cli import one_error_line as _error
from tests.support.cli import tokenplan as _tokenplan

from tokenplan.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "data" / "ground-truth" / "dev.csv"


def _rows(tmp_path: Path, ids: tuple[str, ...], name: str = "mine.csv") -> Path:
    lines = DEV.read_text(encoding="utf-8").splitlines()
    by_id = {line.split(",", 1)[0]: line for line in lines[1:]}
    chosen = [by_id[i] for i in ids]
    out = tmp_path / name
    out.write_text("\n".join([lines[0], *chosen]) + "\n", encoding="utf-8")
    return out


def test_an_output_path_that_is_an_input_is_refused_and_the_input_kept(tmp_path):
    mine = _rows(tmp_path, ("132", "139"))
    before = mine.read_bytes()
    line = _error(_tokenplan("calibrate", "mine.csv", "-o", "mine.csv", cwd=tmp_path))
    assert line.startswith("error: -o 'mine.csv'") and "not one of the measurement files read" in line
    assert mine.read_bytes() == before


def test_the_profile_and_the_band_table_must_be_two_files(tmp_path):
    _rows(tmp_path, ("132", "139"))
    line = _error(_tokenplan("calibrate", "--refit", "mine.csv", "-o", "f.json", "--bands", "f.json", cwd=tmp_path))
    assert line.startswith("error: --bands 'f.json'") and "other than -o f.json" in line
    assert not (tmp_path / "f.json").exists()


def test_a_file_named_twice_or_a_row_id_twice_is_refused(tmp_path):
    _rows(tmp_path, ("132", "139"))
    line = _error(_tokenplan("calibrate", "mine.csv", "mine.csv", "-o", "f.json", cwd=tmp_path))
    assert "each file once" in line
    (tmp_path / "copy.csv").write_bytes((tmp_path / "mine.csv").read_bytes())  # a copy counts its rows twice too
    line = _error(_tokenplan("calibrate", "mine.csv", "copy.csv", "-o", "f.json", cwd=tmp_path))
    assert "each file once (this one holds what mine.csv holds)" in line
    _rows(tmp_path, ("132", "139", "132"), "twice.csv")
    line = _error(_tokenplan("calibrate", "twice.csv", "-o", "f.json", cwd=tmp_path))
    assert line == "error: twice.csv: id 132: each row id once (a repeated row is fitted twice); nothing fitted"
    assert not (tmp_path / "f.json").exists()


def test_a_refit_whose_rows_identify_no_factor_writes_nothing(tmp_path):
    # one row informs no factor (each is fitted from rows of two or more models)
    _rows(tmp_path, ("132",))
    line = _error(_tokenplan("calibrate", "--refit", "mine.csv", "-o", "f.json", "--bands", "b.json", cwd=tmp_path))
    assert "identify none, so nothing was fitted or written" in line
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "b.json").exists()


def test_a_failed_write_keeps_the_old_file_whole(tmp_path, monkeypatch):
    from tokenplan.api.calibrate import save_json
    from tokenplan.runner.store import appendlog

    old = tmp_path / "fit.json"
    old.write_text('{"old": true}\n', encoding="utf-8")

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(appendlog.os, "replace", full_disk)
    with pytest.raises(InputError) as caught:
        save_json(old, {"new": True}, "-o")
    assert "No space left on device" in str(caught.value) and str(old) in str(caught.value)
    assert old.read_text(encoding="utf-8") == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["fit.json"]  # no temporary file left behind


def test_predict_names_the_factors_it_used(tmp_path):
    # a break-it pass: with a profile the figures moved (1,725 → 1,822 tok/s) and nothing said so
    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest

    _rows(tmp_path, ("132", "139"))
    assert _tokenplan("calibrate", "mine.csv", "-o", "p.json", cwd=tmp_path).returncode == 0
    point = {"model": "qwen3-32b", "gpu": "h200", "engine": "vllm"}
    shipped = predict(PredictRequest(**point))
    assert shipped.efficiency.startswith("fit by `tokenplan calibrate --refit data/ground-truth/dev.csv")
    mine = predict(PredictRequest(**point, calibration=str(tmp_path / "p.json")))
    assert mine.efficiency.startswith(f"calibration {tmp_path / 'p.json'}: update of the shipped fit")
    assert mine.to_json()["efficiency"] == mine.efficiency
    shown = _tokenplan(
        "predict", "--model", "qwen3-32b", "--gpu", "h200", "--engine", "vllm", "--calibration", "p.json", cwd=tmp_path
    )
    assert shown.returncode == 0 and "Efficiency: calibration p.json: update of the shipped fit" in shown.stdout


def test_a_plan_lists_only_the_profile_groups_it_uses(tmp_path):
    # a break-it pass: a profile fitted on H100/H200 rows listed its sglang/hopper, vllm/hopper …
    # moves at the top of a plan on one MI300X, which uses sglang/cdna3 and none of them
    from tokenplan.api.plan import PlanRequest, plan
    from tokenplan.api.resolve import read_profile

    _rows(tmp_path, ("132", "139"))  # vLLM rows on H100 PCIe and H200: vllm/hopper
    assert _tokenplan("calibrate", "mine.csv", "-o", "p.json", cwd=tmp_path).returncode == 0
    profile = read_profile(str(tmp_path / "p.json"))
    assert "vllm/hopper" in profile.move_groups
    assert profile.moves_for("sglang", {"cdna3"}) == ()
    assert any("moves vllm/hopper" in line for line in profile.moves_for("vllm", {"hopper"}))
    on_mi300x = plan(PlanRequest(model="llama-3.1-8b", gpus=("1xmi300x",), calibration=str(tmp_path / "p.json")))
    answer = " ".join(on_mi300x.to_json()["answer"])
    assert "moves vllm/hopper:" not in answer


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # the served configuration belongs to --from-run/--from-bench: a CSV row states its own
        (("--gpu", "nope"), "--gpu 'nope' is not allowed (allowed: only with --from-run or --from-bench"),
        (("--tp", "0"), "--tp '0' is not allowed (allowed: only with --from-run or --from-bench"),
        (("--isl", "5"), "--isl '5' is not allowed (allowed: only with --from-run (a CSV row"),  # as typed, not 5.0
    ],
)
def test_an_option_the_csv_fit_does_not_read_is_refused_and_nothing_is_written(tmp_path, args, said):
    # a break-it pass: `calibrate mine.csv -o p.json --gpu nope --tp 0` wrote p.json, exit 0
    _rows(tmp_path, ("132", "139"))
    line = _error(_tokenplan("calibrate", "mine.csv", "-o", "p.json", *args, cwd=tmp_path))
    assert line.startswith(f"error: {said}")
    assert not (tmp_path / "p.json").exists()


def test_csv_files_or_fit_options_beside_from_bench_are_refused(tmp_path):
    _rows(tmp_path, ("132", "139"))
    bench = tmp_path / "b.json"
    bench.write_text("{}")
    line = _error(_tokenplan("calibrate", "mine.csv", "--from-bench", "b.json", "-o", "p.json", cwd=tmp_path))
    assert (
        line
        == "error: FILES 'mine.csv' is not allowed (allowed: no CSV files with --from-bench (calibrate them on their own))"
    )
    line = _error(_tokenplan("calibrate", "--from-bench", "b.json", "-o", "p.json", "--no-cv", cwd=tmp_path))
    assert line == "error: option '--no-cv' is not allowed (allowed: only with CSV files)"
    line = _error(_tokenplan("calibrate", "--from-bench", "b.json", "-o", "p.json", "--concurrency", "8", cwd=tmp_path))
    assert line == "error: --concurrency '8' is not allowed (allowed: only with --from-run)"
    assert not (tmp_path / "p.json").exists()
