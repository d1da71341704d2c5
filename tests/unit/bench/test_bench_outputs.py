"""What bench does after the sweep (files/bench_outputs.py): failures kept as values, decided by type."""

from __future__ import annotations

from pathlib import Path

from tokenplan.errors import InputError, ServerError
from tokenplan.files.bench_outputs import FailedWrite, Finished, OutputLost, finish_bench


def _no_fit(data):  # noqa: ANN001, ANN202 - never called without --fit
    raise AssertionError("no fit was asked for")


def test_a_save_into_a_missing_folder_is_kept_and_the_json_printed(tmp_path: Path):
    data = {"levels": [{"concurrency": 1}]}
    drawn: list[Path] = []
    done = finish_bench(
        data, None, tmp_path / "gone" / "b.json", tmp_path / "p.png", _no_fit, lambda d, p: drawn.append(p)
    )
    assert [f.option for f in done.failed] == ["--save"] and done.lost("--save") and not done.lost("--plot")
    assert drawn == [tmp_path / "p.png"]
    assert done.print_json(saved=True, asked=False)  # the file that would have kept it was lost
    error = done.error(stopped=None, levels=data["levels"], printed_json=True)
    assert isinstance(error, OutputLost) and "the bench JSON is printed on stdout" in str(error)


TWO_LEVELS = [{"concurrency": 1, "requests": 16, "errors": 0}, {"concurrency": 4, "requests": 16, "errors": 0}]


def test_the_fits_error_comes_first_and_an_early_stop_last():
    fit_error = InputError("levels", 0, "at least one level")
    assert Finished(fit_error=fit_error).error("server gone", TWO_LEVELS, False) is fit_error
    lost = Finished(failed=[FailedWrite("--plot", Path("p.png"), "No space left on device")])
    assert isinstance(lost.error("server gone", TWO_LEVELS, False), OutputLost)
    stopped = Finished().error("server gone", TWO_LEVELS, False)
    assert isinstance(stopped, ServerError) and "2 levels kept" in str(stopped)
    assert Finished().error(None, TWO_LEVELS, False) is None


def test_failed_requests_make_a_finished_sweep_no_success():
    # Concurrency 4 answered 10 and failed 6 (10 + 6 = 16 sent); an open-loop level at 2.5 req/s
    # failed 1 of 21 (20 answered): the error names both, and the first message.
    levels = [
        {"concurrency": 1, "requests": 16, "errors": 0, "error_samples": []},
        {"concurrency": 4, "requests": 10, "errors": 6, "error_samples": ["HTTP 500: boom"]},
        {"concurrency": 0, "request_rate": 2.5, "requests": 20, "errors": 1, "error_samples": ["timed out"]},
    ]
    error = Finished().error(None, levels, False)
    assert isinstance(error, ServerError)
    assert "6 of 16 at concurrency 4, 1 of 21 at request rate 2.5/s" in str(error)
    assert "first: HTTP 500: boom" in str(error) and "\n" not in str(error)
    # an early stop is still the one error raised
    assert "sweep stopped" in str(Finished().error("server gone", levels, False))


def test_the_json_is_printed_when_asked_or_when_a_file_would_lose_it():
    assert not Finished().print_json(saved=False, asked=False)
    assert Finished().print_json(saved=False, asked=True)
    assert not Finished().print_json(saved=True, asked=False)  # saved: the file keeps it
    fit_failed = Finished(fit_error=InputError("levels", 0, "x"))
    assert fit_failed.print_json(saved=False, asked=False)  # nothing else keeps the measurement
    assert Finished(failed=[FailedWrite("--out", Path("p.json"), "denied")]).print_json(saved=True, asked=False)
