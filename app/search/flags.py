"""Operator-style flags: the search knobs from env, overridden by a YAML/JSON file re-read while running.

In Kubernetes the file comes from a ConfigMap volume. The kubelet updates it by swapping the `..data`
symlink, so the file is re-read by content on every poll instead of trusting mtimes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import ValidationError

from app.knobs import KNOB_ALIASES, KNOB_NAMES, SearchKnobs, is_blank, knob_name
from app.misspelt_settings import closest_name
from app.observability.metrics import FLAGS_RELOAD_ERRORS_TOTAL, publish_flags
from app.search.knob_source import ResolvedKnobs
from app.search.settled_files import FileState, SettledFile

if TYPE_CHECKING:
    from pathlib import Path

    from app.config import Settings
    from app.search.knob_source import FlagContext

logger = logging.getLogger(__name__)

FlagSource = Literal["default", "env", "file"]


def knobs_from_settings(settings: Settings) -> SearchKnobs:
    """The knobs as the environment (or their defaults) set them; unset knobs stay unset."""
    return SearchKnobs.model_validate(settings.model_dump(include=set(KNOB_NAMES), exclude_unset=True))


class FlagsFileError(ValueError):
    """A flags file that cannot be applied; the message is one line saying why."""


class _KeySetTwiceError(ValueError):
    def __init__(self, key: object, first: object, second: object, line: int | None = None) -> None:
        where = f" (line {line})" if line is not None else ""
        super().__init__(f"{key} is set twice, to {first} and to {second}{where}: set it once")


class _FlagsYamlLoader(yaml.SafeLoader):
    """`yaml.safe_load`, but a key set twice to different values is an error (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:  # noqa: FBT001, FBT002 - PyYAML's signature
        seen: dict[object, object] = {}
        for key_node, value_node in node.value:  # before `<<` merges, whose keys explicit ones may override
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key, value = self.construct_object(key_node, deep=True), self.construct_object(value_node, deep=True)
            if key in seen and seen[key] != value:
                raise _KeySetTwiceError(key, seen[key], value, line=key_node.start_mark.line + 1)
            seen[key] = value
        return super().construct_mapping(node, deep=deep)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping and mapping[key] != value:
            raise _KeySetTwiceError(key, mapping[key], value)
        mapping[key] = value
    return mapping


def _unknown_flag(key: object) -> str:
    """`unknown flag 'X'`, with the knob (or reference alias) it is spelt almost like, in the key's case."""
    close = closest_name(str(key).strip().lower().replace("-", "_"), (*KNOB_NAMES, *KNOB_ALIASES))
    if close is None:
        return f"unknown flag {key!r}"
    return f"unknown flag {key!r}: did you mean {close.upper() if str(key).isupper() else close}?"


def parse_flags_file(
    content: bytes, *, base: SearchKnobs, json_only: bool = False
) -> tuple[SearchKnobs, frozenset[str]]:
    """Apply a flags file's overrides to `base`; return the new knobs and the names the file set.

    Keys are knob names in any case (`RRF_K_CONSTANT` or `rrf_k_constant`, `-` for `_` too), reference
    aliases included (`FINAL_RESULT_K`). Knobs `base` left unset and the file does not set keep their
    defaults. An empty file overrides nothing, and an empty or blank value (`search_strategy: ""`) sets
    nothing, as an empty variable does: `base`'s value stands. Raises `FlagsFileError` for a parse error, a top level
    that is not a mapping, a key set twice to different values, an unknown key, an alias that disagrees
    with its knob, or an invalid value.
    """
    try:
        loaded = (
            json.loads(content, object_pairs_hook=_json_object)
            if json_only
            else yaml.load(content, Loader=_FlagsYamlLoader)  # noqa: S506 - a SafeLoader
        )
    except _KeySetTwiceError as error:
        raise FlagsFileError(str(error)) from None
    except RecursionError:
        message = "cannot parse: nested too deeply"
        raise FlagsFileError(message) from None
    except (ValueError, yaml.YAMLError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        message = f"cannot parse: {first_line}"
        raise FlagsFileError(message) from None
    if loaded is None:
        return base, frozenset()
    if not isinstance(loaded, dict):
        message = f"top level must be a mapping of flag names, got {type(loaded).__name__}"
        raise FlagsFileError(message)
    overrides: dict[str, object] = {}
    spelled: dict[str, str] = {}  # knob -> the file's key that set it, to name both sides of a clash
    for key, value in loaded.items():
        name = knob_name(str(key))
        if name is None:
            raise FlagsFileError(_unknown_flag(key))
        if is_blank(value):
            continue
        if name in overrides and str(overrides[name]) != str(value):
            message = f"{spelled[name]}={overrides[name]} and {key}={value} disagree (both set {name}): set only one"
            raise FlagsFileError(message)
        overrides[name] = value
        spelled.setdefault(name, str(key))
    try:
        flags = SearchKnobs.model_validate({**base.model_dump(exclude_unset=True), **overrides})
    except ValidationError as error:
        reasons = "; ".join(f"{'.'.join(map(str, item['loc'])).upper()}: {item['msg']}" for item in error.errors())
        message = f"invalid value: {reasons}"
        raise FlagsFileError(message) from None
    return flags, frozenset(overrides)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    flags: SearchKnobs
    file_keys: frozenset[str]
    version: int

    @property
    def resolved(self) -> ResolvedKnobs:
        return ResolvedKnobs(knobs=self.flags, version=self.version)


class FlagStore:
    """`FlagSource` of `FLAGS_PROVIDER=file` (the default): env defaults from `settings`, overridden by `path`.

    `path` defaults to `POIMEN_FLAGS_FILE`, `poll_interval_s` to `FLAGS_POLL_INTERVAL_S`. The file is
    read once on construction; `run()` re-reads it every poll (a file rewritten in place, not renamed over,
    once more first: `app.search.settled_files`). A file that cannot be applied keeps
    the last good flags (the env defaults at start), logs one line and counts
    `poimen_flags_reload_errors_total`. Reads (`current`, `version`) are lock-free: they see one
    immutable snapshot, replaced whole by a successful reload. Every caller gets the same knobs.
    """

    name = "file"

    def __init__(self, settings: Settings, *, path: Path | None = None, poll_interval_s: float | None = None) -> None:
        self._settings = settings
        self.path = path if path is not None else settings.poimen_flags_file
        self.poll_interval_s = poll_interval_s if poll_interval_s is not None else settings.flags_poll_interval_s
        self._defaults = knobs_from_settings(settings)
        self._snapshot = _Snapshot(flags=self._defaults, file_keys=frozenset(), version=0)
        self._last_digest: str | None = None
        self._file = None if self.path is None else SettledFile(self.path)
        self.last_error: str | None = None
        self._reload_lock = threading.Lock()
        self._publish()
        self.reload()

    def current(self) -> SearchKnobs:
        """The flags in force now. Cheap: read it once per request and keep that object."""
        return self._snapshot.flags

    def resolve(self, context: FlagContext) -> ResolvedKnobs:  # noqa: ARG002 - no targeting: one value for all
        """The flags in force and their version, from one snapshot."""
        return self._snapshot.resolved

    @property
    def version(self) -> int:
        """0 for the env flags, plus one for every successful load that changed a flag or its source."""
        return self._snapshot.version

    def sources(self) -> dict[str, FlagSource]:
        """Where each flag's value comes from: the flags file, the environment, or the built-in default."""
        snapshot = self._snapshot
        env_set = self._settings.model_fields_set
        return {
            name: "file" if name in snapshot.file_keys else "env" if name in env_set else "default"
            for name in KNOB_NAMES
        }

    def describe(self) -> dict[str, object]:
        """The JSON body of `GET /admin/flags`: version, file, last error, and each flag's value and source."""
        snapshot = self._snapshot
        values = snapshot.flags.model_dump(mode="json")
        sources = self.sources()
        return {
            "provider": self.name,
            "version": snapshot.version,
            "file": str(self.path) if self.path is not None else None,
            "last_error": self.last_error,
            "flags": {name: {"value": values[name], "source": sources[name]} for name in KNOB_NAMES},
        }

    def reload(self) -> bool:
        """Re-read the flags file; return True when the flags in force changed.

        Unchanged content is not parsed again, so a bad file is reported once, not on every poll.
        """
        if self._file is None or self.path is None:
            return False
        with self._reload_lock:
            content = self._read_settled(self._file)
            if content is None:
                return False
            try:
                flags, file_keys = parse_flags_file(
                    content, base=self._defaults, json_only=self.path.suffix.lower() == ".json"
                )
            except FlagsFileError as error:
                self._reject(str(error))
                return False
            self.last_error = None
            previous = self._snapshot
            if flags == previous.flags and file_keys == previous.file_keys:
                return False
            self._snapshot = _Snapshot(flags=flags, file_keys=file_keys, version=previous.version + 1)
            self._publish()
            changed = sorted(name for name in KNOB_NAMES if getattr(flags, name) != getattr(previous.flags, name))
            logger.info(
                "flags version %d from %s: changed %s", self._snapshot.version, self.path, ", ".join(changed) or "none"
            )
            return True

    def _read_settled(self, file: SettledFile) -> bytes | None:
        """The file's content when it changed and is not maybe mid-write; None when unchanged, unreadable or pending."""
        read = file.read(settled_digest=self._last_digest)
        if read.state is FileState.UNREADABLE:
            if read.digest != self._last_digest:
                self._last_digest = read.digest
                self._reject(read.error)
            return None
        if read.state is not FileState.CHANGED:
            return None
        self._last_digest = read.digest
        return read.content

    def problem(self) -> str | None:
        """Why the last flags file was rejected (the last good flags stay in force), or None."""
        return self.last_error

    def close(self) -> None:
        """Nothing to release: the poller stops with `run()`'s task."""

    async def run(self) -> None:
        """Poll the flags file until cancelled; returns at once when there is no file to watch.

        A reload that fails unexpectedly is reported as a rejected file (the last good flags stay) and
        polling goes on: the task used to end with the error, and no later edit was ever applied.
        """
        if self.path is None:
            return
        while True:
            await asyncio.sleep(self.poll_interval_s)
            try:
                await asyncio.to_thread(self.reload)
            except Exception as error:  # noqa: BLE001 - one failed read must not end hot reload for good
                first_line = (str(error).splitlines() or [""])[0]
                self._reject(f"reload failed: {type(error).__name__}: {first_line}")

    def _reject(self, reason: str) -> None:
        self.last_error = reason
        FLAGS_RELOAD_ERRORS_TOTAL.inc()
        logger.warning("flags file %s rejected, keeping version %d: %s", self.path, self._snapshot.version, reason)

    def _publish(self) -> None:
        publish_flags(version=self._snapshot.version, knobs=self._snapshot.flags)
