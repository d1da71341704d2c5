"""The open-file limit a run needs: one descriptor per connection, plus a reserve.

``generate`` keeps one connection per request in flight (the client's pools are sized to the
concurrency), and every connection is a socket, i.e. one file descriptor. Linux's default soft
limit (1,024; ``ulimit -n``) is far below a 5,000-deep run, while the hard limit is usually
higher (systemd's default hard limit is 524,288), and an unprivileged process may raise its soft
limit up to the hard one (``setrlimit(2)``). So the runner raises the soft limit to the hard limit
at start, and refuses a concurrency the hard limit cannot hold, before sending anything.
"""

from __future__ import annotations

from tokenplan.errors import InputError

# Descriptors besides connections: the Python interpreter and its imports, the run directory's
# shards and side files, the input files, the event loop's self-pipe and epoll, DNS lookups.
RESERVE_FDS = 64
# Requests in flight per endpoint at most: 5,000 in flight is measured (docs/generate.md); 20× that.
MAX_CONCURRENCY = 100_000


def raise_open_file_limit() -> int | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return the soft limit now in force
    (``None`` where the platform has no ``resource`` module, e.g. Windows)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the soft limit we have; the check below still applies
    return soft if soft != resource.RLIM_INFINITY else None


def check_open_files(connections: int) -> None:
    """Raise the soft open-file limit, then refuse ``connections`` it cannot hold.

    Raises:
        InputError: ``connections + RESERVE_FDS`` exceeds the (raised) limit; the message names the
            most requests in flight the limit allows and how to raise it.
    """
    limit = raise_open_file_limit()
    if limit is not None and connections + RESERVE_FDS > limit:
        raise InputError(
            "--concurrency",
            connections,
            f"at most {max(limit - RESERVE_FDS, 0):,} requests in flight in all (concurrency × "
            f"endpoints): the open-file limit is {limit:,} (ulimit -Hn) and {RESERVE_FDS} are kept "
            "for files; raise the hard limit (ulimit -n, LimitNOFILE=) or lower --concurrency",
        )
