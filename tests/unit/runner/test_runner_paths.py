"""Up-front checks of --out, --export, --save, --plot: one InputError naming the option, the
value and what is allowed, before any work; nothing created but the run directory itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokenplan.errors import InputError
from tokenplan.runner.paths import check_output_file, check_run_dir


def _message(excinfo: pytest.ExceptionInfo[InputError]) -> str:
    return str(excinfo.value)


def test_run_dir_is_created_with_its_parents_and_an_existing_one_is_kept(tmp_path: Path) -> None:
    check_run_dir(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir() and os.listdir(tmp_path / "a" / "b") == []  # the probe is gone
    (tmp_path / "a" / "b" / "keep").write_text("x")
    check_run_dir(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b" / "keep").read_text() == "x"


def test_run_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("data")
    with pytest.raises(InputError) as excinfo:
        check_run_dir(afile)
    assert _message(excinfo) == (
        f"--out {str(afile)!r} is not allowed (allowed: a directory to create or reuse; this path is an existing file)"
    )
    assert afile.read_text() == "data"


def test_run_dir_under_a_file_or_in_proc_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("data")
    with pytest.raises(InputError) as excinfo:
        check_run_dir(tmp_path / "afile" / "run")
    assert _message(excinfo).endswith("(allowed: a directory to create or reuse (cannot create it: Not a directory))")
    if Path("/proc/self").exists():  # procfs refuses new entries, even to root
        with pytest.raises(InputError) as excinfo:
            check_run_dir(Path("/proc/forbidden"))
        assert _message(excinfo) == (
            "--out '/proc/forbidden' is not allowed (allowed: a directory to create or "
            "reuse (cannot create it: No such file or directory))"
        )


def test_output_file_checks_create_nothing(tmp_path: Path) -> None:
    check_output_file(tmp_path / "x.parquet", "--export")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("target", "tail"),
    [
        ("missing/x.json", "; {tmp}/missing does not exist)"),
        ("afile/x.json", "; {tmp}/afile is not a directory)"),
        ("adir", "; this path is a directory)"),
    ],
)
def test_output_file_in_a_missing_directory_or_a_directory_is_refused(tmp_path: Path, target: str, tail: str) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    with pytest.raises(InputError) as excinfo:
        check_output_file(tmp_path / target, "--save", "a JSON file path")
    assert _message(excinfo) == (
        f"--save {str(tmp_path / target)!r} is not allowed (allowed: a JSON file path in "
        f"an existing, writable directory" + tail.format(tmp=tmp_path)
    )


def test_output_file_in_an_unwritable_directory_is_refused(tmp_path: Path) -> None:
    if not Path("/proc/self").exists():
        pytest.skip("needs procfs: a directory not even root can write in")
    with pytest.raises(InputError) as excinfo:
        check_output_file(Path("/proc/x.png"), "--plot", "a PNG file path")
    assert _message(excinfo).startswith(
        "--plot '/proc/x.png' is not allowed (allowed: a PNG file path in an "
        "existing, writable directory; cannot write in /proc ("
    )
