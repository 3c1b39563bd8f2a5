"""DATABASE_RUNTIME_ROLE: validated at start with a one-line error, never accepted and ignored."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings, describe_validation_error

OWNER_URL = "postgresql://app:secret@db-rw.search:5432/app"


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def test_a_plain_role_name_with_a_database_is_accepted() -> None:
    assert settings(database_url=OWNER_URL, database_runtime_role="poimen_runtime").database_runtime_role == (
        "poimen_runtime"
    )


def test_an_empty_role_means_unset() -> None:
    assert settings(database_url=OWNER_URL, database_runtime_role="").database_runtime_role is None


@pytest.mark.parametrize("name", ["Poimen", "poimen-runtime", "1role", 'x"; DROP TABLE documents; --', "a" * 64])
def test_a_role_name_that_is_no_plain_identifier_is_refused(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        settings(database_url=OWNER_URL, database_runtime_role=name)

    assert "database_runtime_role" in describe_validation_error(caught.value).lower()


def test_a_runtime_role_without_an_external_database_is_refused() -> None:
    with pytest.raises(ValidationError, match="DATABASE_RUNTIME_ROLE grants a role of an external database"):
        settings(database_runtime_role="poimen_runtime")
