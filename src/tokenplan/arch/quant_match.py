"""Which modules a quantized checkpoint stores quantized, by its quantization block's own lists:
found per method, checked, and turned into one predicate over module names.

Each method keeps its list of modules left unquantized under its own key and matches entries its
own way (:func:`module_rule`):

- compressed-tensors: ``ignore`` (a module name, or ``re:`` and a regular expression matched
  from the name's start: compressed-tensors ``match_name``, vLLM ``should_ignore_layer``); its
  ``config_groups`` ``targets`` say which modules are quantized at all (``Linear``: every
  linear layer; else the names and ``re:`` patterns listed);
- NVIDIA ModelOpt (``modelopt``, ``modelopt_fp4``, or a block whose ``producer.name`` is
  ``modelopt``): ``ignore`` in a config.json block, or ``exclude_modules`` (at the top, or under
  ``quantization`` as ``hf_quant_config.json`` writes it) — vLLM
  ``ModelOptQuantConfigBase.from_config``; entries are module names and ``fnmatch`` wildcards
  (vLLM ``is_layer_excluded``: "modelopt exclude modules are not simple strings, they are
  wildcards");
- FP8 (``fp8``, ``fbgemm_fp8``), MXFP4: ``ignored_layers``, else ``modules_to_not_convert``
  (vLLM ``Fp8Config.from_config``); AWQ/GPTQ: ``modules_to_not_convert``, and GPTQ's ``dynamic``
  rules whose key starts with ``-:`` (a regular expression matched from the name's start: vLLM
  ``get_dynamic_override``, "Negative match: matched modules are excluded from quantized
  init"); bitsandbytes: ``llm_int8_skip_modules``. An entry names a module: it leaves out the
  modules whose dotted name holds it whole between dots (SGLang's dot-boundary match,
  sgl-project/sglang#23467: ``mlp.gate``, a MoE router, is not ``mlp.gate_proj``), and a
  wildcard entry the modules it or one of their parents matches (gpt-oss's
  ``model.layers.*.self_attn``).

MXFP4 quantizes the MoE experts only, whatever its list says: vLLM's ``Mxfp4Config`` gives every
linear layer ``UnquantizedLinearMethod`` (:attr:`ModuleRule.only`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import regex

from tokenplan.arch.quant import quant_method
from tokenplan.errors import ConfigError

_ALLOWED = "a list of module names, * wildcards and re:<regular expression> patterns"
# quant_method → the keys of its list of modules kept unquantized; the first present is read
_LIST_KEYS: dict[str, tuple[str, ...]] = {
    "compressed-tensors": ("ignore",),
    **dict.fromkeys(("fp8", "fbgemm-fp8", "mxfp4"), ("ignored_layers", "modules_to_not_convert")),
    **dict.fromkeys(("awq", "gptq", "awq-marlin", "gptq-marlin", "marlin"), ("modules_to_not_convert",)),
    "bitsandbytes": ("llm_int8_skip_modules",),
    "modelopt": ("ignore", "exclude_modules"),
    "modelopt-fp4": ("ignore", "exclude_modules"),
}
_GLOB = frozenset("*?[")
_MATCH_TIMEOUT_S = 1.0  # one pattern against one module name; a catastrophic backtrack is refused


@dataclass(frozen=True, slots=True)
class ModuleRule:
    """Which modules a checkpoint stores quantized.

    Attributes:
        excluded: ``module name → left unquantized by a list``.
        targeted: ``module name → quantized by a group's targets`` (None: every linear layer).
        only: the components the method quantizes at all (None: every one), e.g. MXFP4's
            ``("routed_experts",)``.
    """

    excluded: Callable[[str], bool]
    targeted: Callable[[str], bool] | None = None
    only: tuple[str, ...] | None = None

    def quantized(self, spellings: list[str]) -> bool:
        """Whether the module spelled any of ``spellings`` (one module's possible full names) is
        stored quantized: some spelling targeted, none left out by a list."""
        targeted = self.targeted is None or any(self.targeted(n) for n in spellings)
        return targeted and not any(self.excluded(n) for n in spellings)


def module_rule(quant: object, key: str, source: str) -> ModuleRule | None:
    """The rule a quantization block's lists give (see the module docstring), or None where it
    lists no module left out and targets every linear layer (the format's own rule then applies,
    :func:`tokenplan.arch.params.quantized_fraction`).

    Args:
        quant: the block (``quantization_config``, ``compression_config`` or an
            ``hf_quant_config.json``).
        key: its dotted path, for messages (``quantization_config``,
            ``text_config.quantization_config``; ``""`` for a file of its own).
        source: the file, for messages.

    Raises:
        ConfigError: a list that is not a list of text, a ``re:`` entry that does not compile, or
            one that takes over a second to match a module name; each names the list's key.
    """
    if not isinstance(quant, Mapping):
        return None
    method = quant_method(quant)
    if method not in _LIST_KEYS:
        return None
    where: Mapping[str, object] = quant
    inner = quant.get("quantization")
    if method.startswith("modelopt") and isinstance(inner, Mapping):  # hf_quant_config.json's nesting
        where, key = inner, _join(key, "quantization")
    excluded: list[Callable[[str], bool]] = []
    for name in _LIST_KEYS[method]:
        value = where.get(name)
        if value is not None and value != []:
            field = _join(key, name)
            excluded.append(_matcher(_entries(value, source, field), source, field, method != "compressed-tensors"))
            break
    dynamic = quant.get("dynamic") if method.startswith("gptq") else None
    if isinstance(dynamic, Mapping) and (negative := ["re:" + k[2:] for k in dynamic if str(k).startswith("-:")]):
        excluded.append(_matcher(negative, source, _join(key, "dynamic"), True))
    targeted = _targets(quant, key, source) if method == "compressed-tensors" else None
    only = ("routed_experts",) if method == "mxfp4" else None
    if not excluded and targeted is None and only is None:
        return None

    def left_out(module: str) -> bool:
        return any(e(module) for e in excluded)

    return ModuleRule(left_out, targeted, only)


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _entries(value: object, source: str, field: str) -> list[str]:
    """``value`` as a list of text, else a one-line error naming the first entry that is not."""
    if not isinstance(value, list):
        raise ConfigError(source, field, f"{_short(value)} is not {_ALLOWED}")
    for i, entry in enumerate(value):
        if not isinstance(entry, str):
            raise ConfigError(source, field, f"entry {i} ({_short(entry)}) is not text; expected {_ALLOWED}")
    return value


def _targets(quant: Mapping[str, object], key: str, source: str) -> Callable[[str], bool] | None:
    """compressed-tensors: the modules its ``config_groups`` quantize, or None where a group
    targets every linear layer (``Linear``) or names no targets."""
    groups = quant.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        return None
    listed: list[str] = []
    for name, group in groups.items():
        targets = group.get("targets") if isinstance(group, Mapping) else None
        if targets is None or targets == "Linear" or (isinstance(targets, list) and "Linear" in targets):
            return None
        listed += _entries(targets, source, _join(key, f"config_groups.{name}.targets"))
    return _matcher(listed, source, _join(key, "config_groups.targets"), False)


def _matcher(entries: list[str], source: str, field: str, whole_between_dots: bool) -> Callable[[str], bool]:
    """A predicate ``module name → named by an entry``: ``re:`` patterns matched from the name's
    start, ``fnmatch`` wildcards, and plain names — equal to the name, or (``whole_between_dots``)
    held in it whole between dots, with the wildcards then also tried on its parents. Answers
    are kept per name (one name is asked once per layer prefix and projection)."""
    patterns = []
    for p in entries:
        if p.startswith("re:"):
            try:
                patterns.append((p, regex.compile(p[3:])))
            except regex.error as exc:
                raise ConfigError(source, field, f"entry {_short(p)} is not a regular expression ({exc})") from None
    plain = {p for p in entries if not p.startswith("re:") and not _GLOB & set(p)}
    globs = [p for p in entries if not p.startswith("re:") and _GLOB & set(p)]
    # every wildcard in one compiled alternation: a list of thousands stays one regular expression
    glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
    seen: dict[str, bool] = {}

    def named(name: str) -> bool:
        parts = name.split(".")
        if whole_between_dots:
            runs = {".".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}
            if runs & plain:
                return True
            candidates = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
        else:
            if name in plain:
                return True
            candidates = [name]
        if glob is not None and any(glob.match(c) for c in candidates):
            return True
        for text, compiled in patterns:
            try:
                if compiled.match(name, timeout=_MATCH_TIMEOUT_S) is not None:
                    return True
            except TimeoutError:
                raise ConfigError(
                    source, field, f"entry {_short(text)} takes over {_MATCH_TIMEOUT_S:g} s to match {name!r}"
                ) from None
        return False

    def matches(name: str) -> bool:
        if name not in seen:
            seen[name] = named(name)
        return seen[name]

    return matches
