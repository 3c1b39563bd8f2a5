"""Bounded lists in a JSON body, counted before they are decoded: one past its bound is a 400 at item bound + 1.

msgspec checks a list's `max_length` only once it has decoded every item; these probes read the raw body
down to each bounded list and stop at its first item past the bound (`refuse_over_bound_lists`,
`refuse_long_lists`).
"""

from __future__ import annotations

import functools
from typing import Any, Final

import msgspec
import msgspec.inspect

from app.domain.errors import InvalidInputError

_Step = tuple[str, int]
"""One step into a body: (field's JSON name, 0), or ("", bound) for the items of a list of that bound."""
MAX_SHAPE_DEPTH: Final = 8
"""How deep into a body's type its shape is walked (fields and list items within one another)."""


@functools.cache
def _bounded_lists(body_type: type[msgspec.Struct]) -> tuple[tuple[tuple[_Step, ...], int], ...]:
    """Every list with a `max_length` in `body_type`'s shape, at any depth: (steps to it, bound)."""
    found: list[tuple[tuple[_Step, ...], int]] = []

    def walk(node: msgspec.inspect.Type, steps: tuple[_Step, ...]) -> None:
        if len(steps) > MAX_SHAPE_DEPTH:
            return
        if isinstance(node, msgspec.inspect.Metadata):  # a type with a description or other JSON schema
            walk(node.type, steps)
        elif isinstance(node, msgspec.inspect.UnionType):
            for member in node.types:
                walk(member, steps)
        elif isinstance(node, msgspec.inspect.StructType):
            for field in node.fields:
                walk(field.type, (*steps, (field.encode_name, 0)))
        elif isinstance(node, msgspec.inspect.ListType) and node.max_length is not None:
            found.append((steps, node.max_length))
            walk(node.item_type, (*steps, ("", node.max_length)))

    walk(msgspec.inspect.type_info(body_type), ())
    return tuple(dict.fromkeys(found))


def refuse_over_bound_lists(body: bytes, body_type: type[msgspec.Struct]) -> None:
    """A 400 naming the list when a bounded list anywhere in `body` is over its bound, before any item is decoded.

    msgspec checks a list's `max_length` only once it has decoded every item: a batch of 3,000,000
    queries built them all (4 s, 1.1 GB) before it was refused, and 4,000,000 tags in a search's
    filters took 3 s and 235 MB. One probe per bounded list (`_path_probe`) reads the body as raw JSON
    down to that list and stops at its first item past the bound. Other shape errors are left to the
    typed decode, which says what is wrong and where.
    """
    for steps, bound in _bounded_lists(body_type):
        try:
            msgspec.json.decode(body, type=_path_probe(steps, bound))
        except msgspec.ValidationError as error:
            if LIST_TOO_LONG in str(error):
                # The probe's message names no item ("documents[*].tags"): the path is found again, by index.
                found = _over_bound_path(body, steps, bound)
                path = found or "".join(f".{name}" if name else "[*]" for name, _ in steps)
                msg = f"{path.lstrip('.')}: must hold at most {bound} items"
                raise InvalidInputError(msg, field=path.lstrip(".")) from None


def _over_bound_path(raw: bytes, steps: tuple[_Step, ...], bound: int) -> str | None:
    """The path (`.documents[2].tags`) of the first list at `steps` in `raw` over `bound`, one raw level at a time.

    Lists on the way are within their bounds: `_bounded_lists` puts an outer list before its items' lists.
    """
    try:
        if not steps:
            msgspec.json.decode(raw, type=_at_most(bound))
            return None
        name = steps[0][0]
        if not name:
            items = msgspec.json.decode(raw, type=list[msgspec.Raw])
            found = ((index, _over_bound_path(item, steps[1:], bound)) for index, item in enumerate(items))
            return next((f"[{index}]{path}" for index, path in found if path is not None), None)
        value = getattr(msgspec.json.decode(raw, type=_object_with(name, msgspec.Raw)), name)
        path = None if value is msgspec.UNSET else _over_bound_path(value, steps[1:], bound)
    except msgspec.ValidationError as error:
        return "" if not steps and LIST_TOO_LONG in str(error) else None
    except msgspec.DecodeError:
        return None
    return None if path is None else f".{name}{path}"


def prepare_probes(*body_types: type[msgspec.Struct]) -> None:
    """Build the probes of these body types now: one for a batch's 10,000 slots takes about 0.4 s, once."""
    for body_type in body_types:
        for steps, bound in _bounded_lists(body_type):
            _path_probe(steps, bound)


@functools.cache
def _path_probe(steps: tuple[_Step, ...], bound: int) -> type[msgspec.Struct]:
    """A type that reads only the way to one bounded list and refuses its item `bound + 1`.

    The list may share its field with a scalar (`level`: one level or a list of them); any other shape
    on the way fails this probe with a message that is not `LIST_TOO_LONG`, and is left alone.
    """
    value: Any = _at_most(bound) | str | int | float | bool | None
    for name, items_bound in reversed(steps[1:]):
        value = _object_with(name, value) | None if name else _at_most(items_bound, value)
    return _object_with(steps[0][0], value)


def _object_with(name: str, value: Any) -> type[msgspec.Struct]:  # noqa: ANN401 - any msgspec type
    return msgspec.defstruct(f"Probe{name.title()}", [(name, value | msgspec.UnsetType, msgspec.UNSET)])


LIST_TOO_LONG: Final = "of at most length"
"""What msgspec says of an array longer than its bound (`refuse_long_lists`)."""


def refuse_long_lists(body: bytes, bounds: dict[str, int]) -> frozenset[str]:
    """The bounded names `body` holds; `msgspec.ValidationError` when one of its lists holds more than its bound.

    Counted without building the items and stopped at the first one past the bound: a probe type of
    `bound` optional slots (`_at_most`) takes the items as raw JSON and refuses one more. Counting into
    a list of raw items instead took 1.1 GB for 20,000,000 empty objects. Every occurrence of a key
    is read, so a duplicated key does not hide a long list. Also raises for a body that is not an
    object, or a bounded field that is not an array.
    """
    probe = msgspec.json.decode(body, type=_probe(tuple(sorted(bounds.items()))))
    return frozenset(name for name in bounds if getattr(probe, name) is not msgspec.UNSET)


@functools.cache
def _probe(bounds: tuple[tuple[str, int], ...]) -> type[msgspec.Struct]:
    return msgspec.defstruct(
        "BoundedLists", [(name, _at_most(bound) | msgspec.UnsetType, msgspec.UNSET) for name, bound in bounds]
    )


@functools.cache
def _at_most(bound: int, item: Any = msgspec.Raw) -> type[msgspec.Struct]:  # noqa: ANN401 - any msgspec type
    slots = [(f"item{number}", item | msgspec.UnsetType, msgspec.UNSET) for number in range(bound)]
    return msgspec.defstruct(f"AtMost{bound}", slots, array_like=True, forbid_unknown_fields=True)
