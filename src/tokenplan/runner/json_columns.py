"""Arrow's ``arrow.json`` extension type (JSON text in a string column), read and written.

Hugging Face ``datasets`` 5.x stores a value whose shape varies from row to row as its ``Json``
feature, written to Parquet as ``extension<arrow.json>``: ``load_dataset("json")`` of a file whose
messages have different keys (reasoning on some turns, tool fields on others: every regenerated
set) gives ``conversations: list<arrow.json>``, one JSON text per message. pyarrow hands such a
value back as the text (``str``); :func:`json_decoders` builds, per column, the function that
turns it back into the value at any depth (lists, structs, maps).

The Parquet export writes its free-form values (tool calls, input fields of mixed types) with
the same type (:func:`json_type`), so ``datasets`` reads them back decoded. pyarrow ≥ 19 knows the
type (``pa.json_()``); an older one reads it as plain text carrying the field metadata
``ARROW:extension:name = arrow.json``, which is recognised too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

Decoder = Callable[[Any], Any]
_EXTENSION_KEY = b"ARROW:extension:name"
_JSON_NAME = "arrow.json"


def json_type():  # noqa: ANN201 - pyarrow is imported lazily
    """``pa.json_()``: the ``arrow.json`` extension type over UTF-8 text (pyarrow ≥ 19)."""
    import pyarrow as pa

    return pa.json_()


def _is_json(field) -> bool:  # noqa: ANN001 - a pyarrow Field
    import pyarrow as pa

    kind = field.type
    if isinstance(kind, pa.BaseExtensionType) and kind.extension_name == _JSON_NAME:
        return True
    return bool(field.metadata) and field.metadata.get(_EXTENSION_KEY) == _JSON_NAME.encode()


def _loads(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (bytes, str)):
        return orjson.loads(value)
    return value  # already decoded (a reader that knows the type)


def _decoder(field) -> Decoder | None:  # noqa: ANN001, C901 - a pyarrow Field; one branch per nesting kind
    """How to decode a value of ``field``, or None when nothing in it is ``arrow.json``."""
    import pyarrow as pa

    if _is_json(field):
        return _loads
    kind = field.type
    if isinstance(kind, (pa.ListType, pa.LargeListType, pa.FixedSizeListType, pa.ListViewType, pa.LargeListViewType)):
        inner = _decoder(kind.value_field)
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if isinstance(kind, pa.MapType):
        key, item = _decoder(kind.key_field), _decoder(kind.item_field)
        if key is None and item is None:
            return None
        k, i = key or (lambda x: x), item or (lambda x: x)
        return lambda v: None if v is None else [(k(a), i(b)) for a, b in v]
    if isinstance(kind, pa.StructType):
        parts = {kind.field(n).name: d for n in range(kind.num_fields) if (d := _decoder(kind.field(n))) is not None}
        if not parts:
            return None

        def struct(v: Any) -> Any:
            if v is None:
                return None
            return {name: (parts[name](x) if name in parts else x) for name, x in v.items()}

        return struct
    return None


def json_decoders(schema) -> dict[str, Decoder]:  # noqa: ANN001 - a pyarrow Schema
    """Per top-level column holding ``arrow.json`` at any depth, the function that decodes one
    of its values (as ``to_pylist`` gives it); columns without it are not listed.

    The decoders raise ``ValueError`` (``orjson.JSONDecodeError``) on text that is not JSON.
    """
    found = {}
    for field in schema:
        decode = _decoder(field)
        if decode is not None:
            found[field.name] = decode
    return found


def json_text(value: Any) -> str | None:
    """``value`` as JSON text for an ``arrow.json`` column (None stays null); keys as given."""
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
