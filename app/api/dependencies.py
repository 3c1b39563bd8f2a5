"""What handlers may receive by name: the services the composition root built (`create_app` provides them)."""

from __future__ import annotations

from typing import TypeAlias, TypeVar

from litestar.di import NamedDependency
from litestar.params import SkipValidation

T = TypeVar("T")

Injected: TypeAlias = NamedDependency[SkipValidation[T]]
"""A handler parameter filled by name from `create_app`'s dependencies; never validated (services are not data)."""
