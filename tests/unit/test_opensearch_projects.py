"""Per-project OpenSearch index names (pure) and the settings that bound them."""

from __future__ import annotations

import itertools
import random
import re
import string
from fnmatch import fnmatchcase

import pytest
from pydantic import ValidationError

from app.config import Settings
from app.domain.project_ids import PROJECT_ID_PATTERN
from app.engine_settings import OPENSEARCH_INDEX_MAX_CHARS
from app.engines.opensearch_mapping import SCHEMA_VERSION, versioned_index_name
from app.engines.opensearch_projects import (
    MAX_INDEX_NAME_BYTES,
    escape_project_id,
    project_alias,
    project_aliases_pattern,
    project_of_index,
    unescape_project_id,
)

PROJECT_ID_CHARACTERS = string.ascii_letters + string.digits + "._-"
INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*")  # lowercase, no leading `-`, `_` or `+`


def random_project_ids(count: int) -> list[str]:
    generator = random.Random(20261201)
    return [
        "".join(generator.choice(PROJECT_ID_CHARACTERS) for _ in range(generator.randint(1, 64))) for _ in range(count)
    ]


def test_upper_case_and_the_escape_itself_are_escaped_reversibly() -> None:
    assert escape_project_id("notes") == "notes"
    assert escape_project_id("Notes") == "_notes"
    assert escape_project_id("_notes") == "__notes"
    assert escape_project_id("A_b.C-9") == "_a__b._c-9"
    assert project_alias("poimen-chunks", "Notes") == "poimen-chunks-p-_notes"


def test_escaping_is_reversible_and_collision_free_over_random_project_ids() -> None:
    generated = [project_id for project_id in random_project_ids(2000) if project_id not in {".", ".."}]
    project_ids = [*generated, "a", "A", "_", "__", "_a", "-", ".a", "...", "a" * 64, "Z" * 64, "_" * 64]
    assert all(re.fullmatch(PROJECT_ID_PATTERN, project_id) for project_id in project_ids)

    escaped = {project_id: escape_project_id(project_id) for project_id in project_ids}

    assert all(unescape_project_id(name) == project_id for project_id, name in escaped.items())
    assert len(set(escaped.values())) == len(set(project_ids))
    assert all(name == name.lower() for name in escaped.values())


def test_a_name_no_project_id_escapes_to_reads_as_no_project() -> None:
    for name in ("_", "a_", "_1", "_-", "Upper", "a" * 65, "", "a*b", "a:b"):
        assert unescape_project_id(name) is None, name


def test_every_project_index_name_is_valid_and_fits_with_the_longest_base() -> None:
    base = "b" * OPENSEARCH_INDEX_MAX_CHARS
    for project_id in ["_" * 64, "Z" * 64, "-leading", ".", *random_project_ids(200)]:
        name = versioned_index_name(project_alias(base, project_id))

        assert len(name.encode()) <= MAX_INDEX_NAME_BYTES
        assert INDEX_NAME.fullmatch(name), name


def test_an_index_name_is_read_back_to_its_project_for_the_current_schema_only() -> None:
    for project_id in ["notes", "Notes", "x-v7", "a_B", "v7"]:
        index = versioned_index_name(project_alias("base", project_id))
        assert project_of_index("base", index) == project_id

    assert project_of_index("base", versioned_index_name(project_alias("base", "notes"), SCHEMA_VERSION - 1)) is None
    assert project_of_index("base", versioned_index_name(project_alias("other", "notes"))) is None
    assert project_of_index("base", project_alias("base", "notes")) is None  # an alias, not an index
    assert project_of_index("base", "base-p-*-v7") is None


def test_the_base_alias_must_be_a_lowercase_index_name_short_enough_for_every_project() -> None:
    assert Settings(_env_file=None, opensearch_index="poimen-chunks").opensearch_index == "poimen-chunks"
    assert Settings(_env_file=None, opensearch_index="").opensearch_index == "poimen-chunks"  # empty: not set
    for refused in ("Poimen", "-poimen", "_poimen", "+poimen", "poimen chunks", "poimen*", "p" * 117):
        with pytest.raises(ValidationError, match="opensearch_index"):
            Settings(_env_file=None, opensearch_index=refused)


def test_a_base_another_bases_project_names_could_start_with_is_refused() -> None:
    # `poimen-p` + `-p-notes` is `poimen` + `-p-p-notes`: a deployment on `poimen` listed, wrote and pruned it.
    for refused in ("poimen-p", "poimen-p-staging", "team-p-search", "a-p", "a-p-"):
        with pytest.raises(ValidationError, match=f"OPENSEARCH_INDEX='{refused}' must not contain '-p-' nor end"):
            Settings(_env_file=None, opensearch_index=refused)
    for accepted in ("poimen-prod", "poimen-pp", "poimen-p2", "poimen.p", "poimenp", "p", "p-q", "poimen-v2"):
        assert Settings(_env_file=None, opensearch_index=accepted).opensearch_index == accepted


def test_no_name_under_one_accepted_base_is_read_as_a_project_of_another() -> None:
    bases = ["poimen", "poimen-staging", "poimen-a", "poimen-v2", "poimen-prod", "poimen-pp", "poimen-p2", "poimen.p"]
    bases += ["poimenp", "poimen-", "poimen--", "poimen-_p", "poimen-p_", "p", "pp", "p-q", "poimen-p.x", "poimen-pa-q"]
    accepted = [Settings(_env_file=None, opensearch_index=base).opensearch_index for base in bases]
    project_ids = ["notes", "p-notes", "P-notes", "p", "-p-", "staging-p-notes", "a", "v2-p-x", "_", "p_", ".p"]
    for mine, theirs in itertools.permutations(accepted, 2):
        for project_id in project_ids:
            alias = project_alias(theirs, project_id)
            for name in (alias, versioned_index_name(alias), versioned_index_name(alias, 9)):
                assert not fnmatchcase(name, project_aliases_pattern(mine)), (mine, theirs, name)
                assert project_of_index(mine, name) is None, (mine, theirs, name)
            assert all(alias != project_alias(mine, other) for other in project_ids), (mine, theirs, alias)


def test_more_than_one_shard_per_project_is_refused_with_the_reason() -> None:
    assert Settings(_env_file=None).opensearch_shards == 1
    with pytest.raises(ValidationError, match="OPENSEARCH_SHARDS=2 is not supported: every project has its own"):
        Settings(_env_file=None, opensearch_shards=2)


def test_opensearch_url_must_be_an_http_url_or_a_host_and_port() -> None:
    for accepted in ("https://opensearch:9200", "http://127.0.0.1:9200/", "localhost:9200", " http://os:9200 "):
        assert Settings(_env_file=None, opensearch_url=accepted).opensearch_url == accepted.strip()
    assert Settings(_env_file=None, opensearch_url="").opensearch_url is None  # empty: unset
    for refused in ("not a url", "http://", "ftp://opensearch:9200", "http://open search:9200"):
        with pytest.raises(ValidationError, match="expected an http\\(s\\) URL"):
            Settings(_env_file=None, opensearch_url=refused)
