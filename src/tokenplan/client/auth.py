"""The API key a command sends, read from the environment (never from a flag, never logged).

Shared by ``generate`` and ``bench``: both take ``--api-key-env VAR``; without it the key is
``$OPENAI_API_KEY`` when that is set (the OpenAI SDK's and ``vllm bench serve``'s variable), and a
local server needs none.
"""

from __future__ import annotations

import os

from tokenplan.errors import InputError

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"  # read when set; unset is fine (local servers need no key)


def api_key_from_env(name: str | None) -> str | None:
    """The API key held by the environment variable ``name``.

    Args:
        name: the variable ``--api-key-env`` names; ``None`` reads ``$OPENAI_API_KEY`` if set.

    Returns:
        The key, or ``None`` when ``name`` is ``None`` and ``$OPENAI_API_KEY`` is unset or empty.

    Raises:
        InputError: ``name`` is given but that variable is unset or empty, or the key holds a
            control character (CR, LF, …) that no HTTP header may carry.
    """
    if name is None:
        return _header_safe(os.environ.get(DEFAULT_API_KEY_ENV) or None, DEFAULT_API_KEY_ENV)
    key = os.environ.get(name) or None
    if key is None:
        raise InputError("--api-key-env", name,
                         "the name of a set, non-empty environment variable holding the API key "
                         f"(${name} is unset or empty; leave --api-key-env out "
                         "for a server that needs no key)")
    return _header_safe(key, name)


def _header_safe(key: str | None, name: str) -> str | None:
    """``key`` when it can be sent in the ``Authorization`` header: no CR, LF or other control
    character (RFC 9110 §5.5 field values; aiohttp raises on CR/LF in a header rather than send
    it). A key read with ``$(cat key.txt)``-style quoting often ends in one. The message names the
    variable and where the character is, never the key."""
    if key is None:
        return None
    bad = next((i for i, c in enumerate(key) if ord(c) < 32 or ord(c) == 127), None)
    if bad is None:
        return key
    raise InputError("--api-key-env", name,
                     f"a variable whose value has no line break or other control character (${name} has "
                     f"U+{ord(key[bad]):04X} at character {bad + 1} of {len(key)}; the key is not shown)")
