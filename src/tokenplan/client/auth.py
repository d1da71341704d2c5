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
        InputError: ``name`` is given but that variable is unset or empty.
    """
    if name is None:
        return os.environ.get(DEFAULT_API_KEY_ENV) or None
    key = os.environ.get(name) or None
    if key is None:
        raise InputError("--api-key-env", name,
                         "the name of a set, non-empty environment variable holding the API key "
                         f"(${name} is unset or empty; leave --api-key-env out "
                         "for a server that needs no key)")
    return key
