"""The one reader of the JSON and YAML files a user hands tokenplan (``config.json``,
``generation_config.json``, a job YAML, a calibration profile, a ``tokenplan plan --json`` file,
a bench JSON, a run's ``summary.json``, other tools' bench results).

Every failure is one :class:`~tokenplan.errors.ConfigError` naming the file, where (a byte, a
line or a key) and what is allowed — never a traceback:

- bytes that are not UTF-8 (``byte N``);
- text that is not JSON/YAML (``line N`` where the parser says);
- nesting deeper than :data:`MAX_NESTING` objects/lists (``line N``): Python's ``json`` and
  PyYAML's composer recurse once per level, so ``[[[[…`` a hundred thousand deep used to end in
  a ``RecursionError``; every file tokenplan reads nests a handful of levels (a Hugging Face
  ``config.json``: 3, a bench JSON: 4);
- a key given twice in one object or mapping: both parsers keep the last silently, so which
  value a user meant is a guess (YAML 1.2 §3.2.1.1 requires keys to be unique; RFC 8259 §4 says
  names SHOULD be unique and that parsers differ on which one they keep);
- more than :data:`MAX_YAML_ALIASES` YAML aliases (a "billion laughs" document).

Usage::

    from tokenplan.loaders import load_json, load_yaml
    data = load_json("plan.json")        # any JSON value
    job = load_yaml("job.yaml")          # any YAML value
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from tokenplan.errors import ConfigError

# Objects/lists inside one another, the outermost counted as 1. tokenplan's own files nest at
# most 5 levels (a plan JSON: options[].rejected[]); 64 leaves room for any tool's result file.
MAX_NESTING = 64
# A job needs no aliases. k aliases can expand a document at most ~3^(k/3)-fold (levels of 3
# references each), so 10 keep it under 40× while a 9-level "billion laughs" needs 81.
MAX_YAML_ALIASES = 10
_NESTED = f"nested deeper than {MAX_NESTING} levels (allowed: at most {MAX_NESTING} levels of objects and lists)"
_TWICE = "(allowed: each key once)"
# JSON strings (skipped: brackets inside them do not nest) and the brackets that do.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path``.

    Raises:
        ConfigError: ``byte N`` when the file is not UTF-8; ``file`` when it cannot be read.
    """
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), f"byte {exc.start}", "not UTF-8 text (allowed: a UTF-8 text file)") from None
    except OSError as exc:
        raise ConfigError(str(path), "file", f"cannot be read ({exc.strerror or exc})") from None


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: the object as a dict; a key given twice raises :class:`_DuplicateKey`."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests more than :data:`MAX_NESTING` dicts/lists (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_NESTING:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _deep_line(text: str) -> int:
    """The line of ``text`` where its brackets first nest past :data:`MAX_NESTING` (1 if never)."""
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return text.count("\n", 0, match.start()) + 1
        elif token in "]}":
            depth -= 1
    return 1


def parse_json(text: str, source: str, line: int | None = None) -> Any:
    """``text`` parsed as one JSON value. ``NaN``/``Infinity`` parse (as Python's ``json``
    does); the caller's field checks refuse them where a figure must be finite.

    Args:
        text: the JSON text.
        source: the file, for the message.
        line: the line ``text`` is in a JSON-lines file (messages then name it), or None.

    Raises:
        ConfigError: not JSON, a key twice in one object, nested past :data:`MAX_NESTING`, or an
            integer longer than Python converts (4,300 digits).
    """

    def where(offset: int) -> str:
        return f"line {line if line is not None else offset}"

    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        raise ConfigError(source, f"key {exc.key!r}", f"given twice in one object {_TWICE}") from None
    except RecursionError:
        raise ConfigError(source, where(_deep_line(text)), _NESTED) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(source, where(exc.lineno), f"not valid JSON ({exc.msg})") from None
    except ValueError:  # an integer past Python's 4,300-digit conversion limit (a break-it pass)
        raise ConfigError(
            source, where(1), "holds a number of over 4,300 digits (allowed: numbers a config can mean)"
        ) from None
    if isinstance(value, (dict, list)) and _too_deep(value):
        raise ConfigError(source, where(_deep_line(text)), _NESTED)
    return value


def load_json(path: str | Path) -> Any:
    """The JSON value in the file ``path`` (:func:`read_text`, then :func:`parse_json`)."""
    return parse_json(read_text(path), str(path))


class _Refused(yaml.MarkedYAMLError):
    """A YAML document refused by :class:`_BoundedLoader` (its ``problem`` says why)."""


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses more than :data:`MAX_YAML_ALIASES` aliases, nesting past
    :data:`MAX_NESTING` and a key given twice in one mapping (merge keys ``<<`` excepted: keys
    given next to a merge override it, as YAML's merge type says)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise _Refused(
                    problem=f"more than {MAX_YAML_ALIASES} aliases (allowed: at most "
                    f"{MAX_YAML_ALIASES}; a job needs none)",
                    problem_mark=self.peek_event().start_mark,
                )
        elif self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise _Refused(problem=_NESTED, problem_mark=self.peek_event().start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the constructor names it below
                    continue
                if first is not None:
                    raise _Refused(
                        problem=f"key {key!r} given twice in one mapping (first on line {first}) {_TWICE}",
                        problem_mark=key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed as one YAML document by :class:`_BoundedLoader` (YAML's safe subset:
    no Python objects).

    Raises:
        ConfigError: not YAML, too many aliases, nested past :data:`MAX_NESTING`, or a key twice
            in one mapping; ``line N`` where the parser says.
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        assert exc.problem_mark is not None  # every _Refused is raised with the mark of its node
        raise ConfigError(source, f"line {exc.problem_mark.line + 1}", str(exc.problem)) from None
    except RecursionError:  # a deep scalar tag or flow context the composer's count does not see
        raise ConfigError(source, "<root>", _NESTED) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}" if mark is not None else "<root>"
        # The parser's line is where it noticed; an unclosed bracket or quote began earlier (the
        # context: "while parsing a flow sequence" on line 3), which a user looks for first.
        context, begun = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and begun is not None and mark is not None and begun.line != mark.line:
            problem = f"{problem}, {context} begun on line {begun.line + 1}"
        raise ConfigError(source, where, f"not valid YAML ({problem})") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> Any:
    """The YAML value in the file ``path`` (:func:`read_text`, then :func:`parse_yaml`)."""
    return parse_yaml(read_text(path), str(path))
