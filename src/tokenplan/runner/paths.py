"""Up-front checks of the paths a command will write, so a bad one fails before any work is done.

``generate`` checks ``--out`` and ``--export`` before it sends anything; ``bench`` checks
``--save``, ``--plot`` and ``-o`` before it measures. Each check *tries* what the command will do
later (create the directory, create a file beside the target) rather than asking ``os.access``,
which answers yes to root everywhere, even under ``/proc``. A bad path is an
:class:`~tokenplan.errors.InputError` naming the option, the value and what is allowed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tokenplan.errors import InputError


def _why(problem: OSError) -> str:
    return problem.strerror or type(problem).__name__


def _probe_dir(directory: Path) -> str | None:
    """None when a file can be created (and removed) in ``directory``, else the reason."""
    try:
        fd, name = tempfile.mkstemp(prefix=".tokenplan-probe-", dir=directory)
    except OSError as problem:
        return _why(problem)
    os.close(fd)
    os.unlink(name)
    return None


def check_run_dir(path: Path, option: str = "--out") -> None:
    """Make sure ``path`` is a directory this process can write, creating it (and its parents)
    if needed; an existing directory is left as it is.

    Raises:
        InputError: ``path`` is a file, or cannot be created, or is not writable.
    """
    allowed = "a directory to create or reuse"
    if path.exists() and not path.is_dir():
        raise InputError(option, str(path), f"{allowed}; this path is an existing file")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as problem:
        raise InputError(option, str(path), f"{allowed} (cannot create it: {_why(problem)})") from None
    why = _probe_dir(path)
    if why is not None:
        raise InputError(option, str(path), f"a writable directory (cannot write in it: {why})")


def check_output_file(path: str | Path, option: str, what: str = "a file path", create_parent: bool = False) -> None:
    """Make sure ``path`` can be written later: not empty, not a directory, in an existing,
    writable directory. Nothing is created or changed (a probe file is made and removed beside
    it), except that with ``create_parent`` the missing parent directories are created, as the
    writer that follows would create them. Pass a command-line value as the string it was
    given: ``Path("")`` is ``.``, a directory, and would be refused as one.

    Raises:
        InputError: naming ``option``, the value and what is allowed.
    """
    if not str(path).strip():
        raise InputError(option, str(path), what)
    path = Path(path)
    allowed = f"{what} in {'a' if create_parent else 'an existing,'} writable directory"
    if path.is_dir():
        raise InputError(option, str(path), f"{allowed}; this path is a directory")
    parent = path.parent
    if create_parent and not parent.exists():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as problem:
            raise InputError(option, str(path), f"{allowed}; cannot create {parent} ({_why(problem)})") from None
    if not parent.is_dir():
        state = "does not exist" if not parent.exists() else "is not a directory"
        raise InputError(option, str(path), f"{allowed}; {parent} {state}")
    why = _probe_dir(parent)
    if why is not None:
        raise InputError(option, str(path), f"{allowed}; cannot write in {parent} ({why})")
