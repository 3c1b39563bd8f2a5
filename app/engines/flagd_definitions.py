"""A flagd definition file, checked before flagd's in-process provider sees it.

flagd's file watcher applies whatever parses: a file whose top-level key is misspelt (`"flag"`) removes
every flag, a `fractional` split with an unknown variant or a negative weight gives everyone the default
variant, and a variant of the wrong type or out of range fails only when a caller reaches it, each
without a word. It also re-reads only on a newer mtime, so a file renamed into place with an older one
(`cp -p`, `rsync -t`, prepared before the last edit) is never seen, and it logs an ERROR with a traceback
every half second while the file is broken. So the operator's file is read here, by content, and only a
definition set that passes every check below is copied to a private file that flagd watches: a bad one
leaves flagd on the last good definitions, every caller's split included.
"""

from __future__ import annotations

import atexit
import copy
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml
from openfeature.contrib.tools.flagd.core import FlagdCore
from openfeature.contrib.tools.flagd.core.model.flag_store import FlagStore
from openfeature.evaluation_context import EvaluationContext
from openfeature.exception import ErrorCode, OpenFeatureError
from pydantic import ValidationError

from app.knobs import KNOB_NAMES, SearchKnobs, is_blank
from app.misspelt_settings import closest_name
from app.observability.metrics import FLAGS_RELOAD_ERRORS_TOTAL
from app.search.knob_source import BLANK_PROBE_DEFAULT, FLAG_KINDS, flag_key
from app.search.settled_files import FileState, SettledFile

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

logger = logging.getLogger(__name__)

TOP_LEVEL_KEYS: Final = frozenset({"$schema", "flags", "metadata", "$evaluators"})
CONTEXT_ATTRIBUTES: Final = frozenset({"targetingKey", "project", "scopes", "$flagd"})
"""What a targeting rule may read (`{"var": ...}`): what the service puts in every evaluation context."""
KNOB_BY_FLAG: Final = {flag_key(name): name for name in KNOB_NAMES}
TRIAL_CONTEXT: Final = EvaluationContext(targeting_key="definitions-check", attributes={"project": "", "scopes": []})
EMPTY_DEFINITIONS: Final = b'{"flags": {}}'
KIND_DESCRIPTIONS: Final = {
    "boolean": "a boolean",
    "integer": "a whole number",
    "float": "a number",
    "string": "a string",
}


class FlagdDefinitionsError(ValueError):
    """A flagd definition file that cannot be applied; the message is one line saying why."""


def _parse(content: bytes, *, yaml_file: bool) -> object:
    try:
        return yaml.safe_load(content) if yaml_file else json.loads(content)
    except RecursionError:
        message = "cannot parse: nested too deeply"
        raise FlagdDefinitionsError(message) from None
    except (ValueError, yaml.YAMLError) as error:
        message = f"cannot parse: {(str(error).splitlines() or [type(error).__name__])[0]}"
        raise FlagdDefinitionsError(message) from None


def _nodes(rule: object) -> Iterator[dict[str, Any]]:
    """Every JSON-logic operation (a mapping) in a targeting rule, outermost first."""
    if isinstance(rule, dict):
        yield rule
        for value in rule.values():
            yield from _nodes(value)
    elif isinstance(rule, list):
        for value in rule:
            yield from _nodes(value)


def _check_fractional(key: str, arguments: object, variants: dict[str, Any]) -> None:
    buckets: list[Any] = arguments if isinstance(arguments, list) else [arguments]
    if buckets and not isinstance(buckets[0], list):
        buckets = buckets[1:]  # the optional bucketing expression (`{"cat": [...]}`); its `var`s are checked apart
    if not buckets:
        message = f"{key}: fractional needs [variant, weight] buckets"
        raise FlagdDefinitionsError(message)
    total = 0
    for bucket in buckets:
        shaped = isinstance(bucket, list) and len(bucket) in {1, 2} and isinstance(bucket[0], str)
        variant, weight = (bucket[0], bucket[-1] if len(bucket) > 1 else 1) if shaped else (None, None)
        if variant is None or isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            message = f"{key}: fractional bucket {bucket!r} is not [variant, whole weight >= 0]"
            raise FlagdDefinitionsError(message)
        if variant not in variants:
            message = f"{key}: fractional names variant {variant!r}, not one of {sorted(variants)}"
            raise FlagdDefinitionsError(message)
        total += weight
    if total == 0:
        message = f"{key}: fractional weights sum to 0"
        raise FlagdDefinitionsError(message)


def _check_targeting(key: str, targeting: object, variants: dict[str, Any]) -> None:
    for node in _nodes(targeting):
        if "fractional" in node:
            _check_fractional(key, node["fractional"], variants)
        if "var" in node:
            path = node["var"][0] if isinstance(node["var"], list) and node["var"] else node["var"]
            attribute = str(path).split(".", 1)[0]
            if attribute and attribute not in CONTEXT_ATTRIBUTES:
                message = f"{key}: targeting reads {attribute!r}, not one of {sorted(CONTEXT_ATTRIBUTES)}"
                raise FlagdDefinitionsError(message)


def _described(value: object) -> str:
    """`a boolean (true)`: the JSON type first, since `true` and `1` are one value to Python."""
    if isinstance(value, bool):
        kind = "a boolean"
    elif isinstance(value, (int, float)):
        kind = "a whole number" if isinstance(value, int) else "a number"
    else:
        kind = "a string" if isinstance(value, str) else "a list" if isinstance(value, list) else "an object or null"
    return f"{kind} ({json.dumps(value)})"


def _check_variant(key: str, variant: str, value: object) -> None:
    if is_blank(value):
        return  # sets nothing, whatever the flag's type: the knob keeps its env value (`OpenFeatureKnobs`)
    name = KNOB_BY_FLAG[key]
    kind = FLAG_KINDS[name]
    wrong_type = {
        "boolean": not isinstance(value, bool),
        "integer": isinstance(value, bool) or not isinstance(value, int),
        "float": isinstance(value, bool) or not isinstance(value, (int, float)),
        "string": not isinstance(value, str),
    }[kind]
    if wrong_type:
        message = f"{key}: variant {variant!r} is {_described(value)}, not {KIND_DESCRIPTIONS[kind]}"
        raise FlagdDefinitionsError(message)
    try:
        SearchKnobs.model_validate({name: value})
    except ValidationError as error:
        message = f"{key}: variant {variant!r} is {json.dumps(value)}: {error.errors()[0]['msg']}"
        raise FlagdDefinitionsError(message) from None


def _trial_evaluate(key: str, core: FlagdCore) -> None:
    resolvers: dict[str, Callable[[str, Any, EvaluationContext], object]] = {
        "boolean": core.resolve_boolean_value,
        "integer": core.resolve_integer_value,
        "float": core.resolve_float_value,
        "string": core.resolve_string_value,
    }
    kind = FLAG_KINDS[KNOB_BY_FLAG[key]]
    try:
        resolvers[kind](key, None, TRIAL_CONTEXT)  # no default: only a failure matters
    except OpenFeatureError as error:
        if error.error_code == ErrorCode.TYPE_MISMATCH and kind != "string" and _resolves_blank(key, core):
            return  # a number or boolean flag's blank variant sets nothing (`OpenFeatureKnobs` asks as a string)
        message = f"{key}: {error.error_message or error.error_code}"
        raise FlagdDefinitionsError(message) from None


def _resolves_blank(key: str, core: FlagdCore) -> bool:
    try:
        return is_blank(core.resolve_string_value(key, BLANK_PROBE_DEFAULT, TRIAL_CONTEXT).value)
    except OpenFeatureError:
        return False


def check_definitions(content: bytes, *, yaml_file: bool = False) -> dict[str, Any]:
    """The definitions `content` holds, when flagd can apply them and every flag is a knob's with valid variants.

    Raises `FlagdDefinitionsError` for: a parse error; a top level that is not a mapping, lacks `flags`
    or has a key flagd does not read; a flag that is no knob's (`did you mean`); what flagd itself
    refuses (state, variants); a default variant that is not a variant; a variant of the wrong type or
    out of the knob's range (an empty or blank variant, of any flag, is neither: it sets nothing); a
    `fractional` bucket that is no `[variant, whole weight >= 0]` or names an unknown variant; a `var`
    that is not in the evaluation context; an evaluation that fails.
    """
    loaded = _parse(content, yaml_file=yaml_file)
    if not isinstance(loaded, dict) or not isinstance(loaded.get("flags"), dict):
        message = 'top level must be a mapping with a "flags" mapping (flagd.dev/schema/v0/flags.json)'
        raise FlagdDefinitionsError(message)
    unknown = sorted(set(loaded) - TOP_LEVEL_KEYS)
    if unknown:
        message = f"unknown top-level key {unknown[0]!r}: flagd reads only {sorted(TOP_LEVEL_KEYS)}"
        raise FlagdDefinitionsError(message)
    for key in loaded["flags"]:
        if key not in KNOB_BY_FLAG:
            close = closest_name(str(key).replace("_", "-"), tuple(KNOB_BY_FLAG))
            message = f"unknown flag {key!r}" + (f": did you mean {close}?" if close else "")
            raise FlagdDefinitionsError(message)
    store = FlagStore()
    try:
        store.update(copy.deepcopy(loaded))  # flagd's own parse mutates its input
    except OpenFeatureError as error:
        reason = error.error_message or str(error.__cause__ or "") or error.error_code
        message = f"flagd refuses it: {reason}"
        raise FlagdDefinitionsError(message) from None
    core = FlagdCore()
    core.set_flags(copy.deepcopy(loaded))
    for key, flag in store.flags.items():
        default = str(flag.default_variant).lower() if isinstance(flag.default_variant, bool) else flag.default_variant
        if default is not None and default not in flag.variants:
            message = f"{key}: defaultVariant {flag.default_variant!r} is not one of {sorted(flag.variants)}"
            raise FlagdDefinitionsError(message)
        for variant, value in flag.variants.items():
            _check_variant(key, variant, value)
        _check_targeting(key, flag.targeting, dict(flag.variants))
        if flag.state == "ENABLED":
            _trial_evaluate(key, core)
    return loaded


class FlagdDefinitionsGate:
    """Copies the operator's flagd file to `staging` (what flagd watches) when, and only when, it passes the checks.

    `check()` reads `source` by content (a ConfigMap's `..data` symlink swap, a rename, an edit in place or a
    file deleted and recreated are all seen, whatever their mtime). A file that cannot be applied keeps the
    last good definitions in `staging` (none yet: no flags, the env knobs), is counted into
    `poimen_flags_reload_errors_total` and logged once. The same file rewritten in place (not renamed over)
    is judged when the next check reads it unchanged, so an edit caught half-written is neither applied
    nor reported.
    """

    def __init__(self, source: Path) -> None:
        self.source = source
        self._folder = Path(tempfile.mkdtemp(prefix="poimen-flagd-"))
        atexit.register(shutil.rmtree, self._folder, ignore_errors=True)
        self.staging = self._folder / "definitions.json"
        self.last_error: str | None = None
        self._applied_digest: str | None = None
        self._reported_digest: str | None = None
        self._file = SettledFile(source)
        self._staged_ns = 0
        self._lock = threading.Lock()
        self._stage(EMPTY_DEFINITIONS)
        self.check()

    def check(self) -> bool:
        """Read the source once; return True when new definitions were handed to flagd."""
        with self._lock:
            read = self._file.read(settled_digest=self._applied_digest)
            if read.state is FileState.UNREADABLE:
                return self._refuse(read.digest, read.error)
            if read.state is FileState.UNCHANGED:
                self._reported_digest = None
                self.last_error = None
                return False
            if read.state is FileState.PENDING:
                return False
            content, digest = read.content, read.digest
            try:
                definitions = check_definitions(content, yaml_file=self.source.suffix.lower() in {".yaml", ".yml"})
            except FlagdDefinitionsError as error:
                return self._refuse(digest, str(error))
            self._stage(json.dumps(definitions).encode())
            self._applied_digest = digest
            self._reported_digest = None
            self.last_error = None
            return True

    def close(self) -> None:
        """Nothing to do now: the private copy goes at exit, as flagd's watcher may read it once more after shutdown."""

    def _refuse(self, digest: str, reason: str) -> bool:
        if digest == self._reported_digest:
            return False
        self._reported_digest = digest
        self.last_error = reason
        FLAGS_RELOAD_ERRORS_TOTAL.inc()
        logger.warning("flagd definitions %s rejected, keeping the last good ones: %s", self.source, reason)
        return False

    def _stage(self, content: bytes) -> None:
        # flagd re-reads only a newer mtime: make each copy's strictly newer than the last, whatever the clock did.
        self._staged_ns = max(time.time_ns(), self._staged_ns + 1_000_000)
        staging_next = self.staging.with_suffix(".next")
        staging_next.write_bytes(content)
        os.utime(staging_next, ns=(self._staged_ns, self._staged_ns))
        staging_next.replace(self.staging)
