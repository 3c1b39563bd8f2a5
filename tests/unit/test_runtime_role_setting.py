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


def test_database_url_must_be_a_postgresql_url_and_the_refusal_never_shows_it() -> None:
    for accepted in ("postgresql://u:p@db:5432/app", "postgres://u@db/app", "postgresql+asyncpg://u@/app?host=/run"):
        assert Settings(_env_file=None, database_url=f" {accepted} ").database_url == accepted
    assert Settings(_env_file=None, database_url="").database_url is None  # empty: unset
    for refused, got in (
        ("not-a-url", "no scheme"),
        ("mysql://u:secret@db/app", "the scheme 'mysql'"),
        ("postgresql+psycopg://u:secret@db/app", "the scheme 'postgresql+psycopg'"),
        ("postgresql://u:secret@db/my app", "a space inside it"),
    ):
        with pytest.raises(ValidationError) as raised:
            Settings(_env_file=None, database_url=refused)
        line = describe_validation_error(raised.value)  # what `poimen` prints
        assert line.startswith("invalid configuration: DATABASE_URL: ")
        assert line.endswith(
            f"expected a PostgreSQL URL such as postgresql://user:password@host:5432/database, got {got}"
        )
        assert "secret" not in line


def test_a_variable_of_several_forms_is_named_once_as_set() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(_env_file=None, log_json="maybe", rrf_k_constant="x")

    line = describe_validation_error(raised.value)

    # pydantic names each accepted form after the variable (LOG_JSON_BOOL, LOG_JSON_LITERAL['AUTO']).
    assert line.startswith("invalid configuration: ")
    assert "LOG_JSON: Input should be a valid boolean" in line
    assert "or Input should be 'auto'" in line
    assert "LOG_JSON_" not in line
    assert "RRF_K_CONSTANT: Input should be a valid integer" in line
