"""A project's folder name in the embedded lexical index: one per id, read back, never equal to another's in any case.

No file system that ignores case can be mounted here (the tests run on Linux as an unprivileged user), so these
check the mapping: names that differ under case folding are names such a file system keeps apart.
"""

from __future__ import annotations

import itertools
import random
import string

import pytest

from app.domain.project_ids import is_project_id
from app.engines.tantivy_folder_names import project_folder_name, project_of_folder_name

ID_ALPHABET = string.ascii_letters + string.digits + "._-"
SEED = 20_260_101


def sampled_ids() -> list[str]:
    """Every id of up to 3 characters over a small alphabet, plus seeded random ids and each one's case variants."""
    small = "aAzZ0.-_"
    exhaustive = ["".join(letters) for length in (1, 2, 3) for letters in itertools.product(small, repeat=length)]
    generator = random.Random(SEED)
    drawn = ["".join(generator.choices(ID_ALPHABET, k=generator.randint(1, 64))) for _ in range(3000)]
    variants = [variant for drawn_id in drawn for variant in (drawn_id.lower(), drawn_id.upper(), drawn_id.swapcase())]
    return sorted({project_id for project_id in exhaustive + drawn + variants if is_project_id(project_id)})


SAMPLED_IDS = sampled_ids()


def test_no_two_ids_get_folder_names_equal_under_case_folding() -> None:
    folded: dict[str, str] = {}

    for project_id in SAMPLED_IDS:
        folded.setdefault(project_folder_name(project_id).casefold(), project_id)

    assert len(SAMPLED_IDS) > 5000
    assert len(folded) == len(SAMPLED_IDS)


def test_every_folder_name_reads_back_to_its_id() -> None:
    read_back = {project_id: project_of_folder_name(project_folder_name(project_id)) for project_id in SAMPLED_IDS}

    assert read_back == {project_id: project_id for project_id in SAMPLED_IDS}


def test_folder_names_hold_no_uppercase_letter_and_no_trailing_dot() -> None:
    names = [project_folder_name(project_id) for project_id in SAMPLED_IDS]

    assert [name for name in names if name != name.lower() or name.endswith(".")] == []


@pytest.mark.parametrize(
    ("project_id", "name"),
    [
        ("acme", "p-acme"),
        ("Acme", "p-+acme"),
        ("ACME", "p-+a+c+m+e"),
        ("proj_a-1.b", "p-proj_a-1.b"),
        ("..a", "p-..a"),
        ("a.", "p-a.+"),
        ("A..", "p-+a..+"),
    ],
)
def test_the_names_of_some_ids(project_id: str, name: str) -> None:
    assert project_folder_name(project_id) == name
    assert project_of_folder_name(name) == project_id


@pytest.mark.parametrize(
    "name",
    [
        "p-Acme",  # the name before names were escaped: renamed at open, never read as a project
        "p-a.",
        "p-a+",
        "p-+",
        "p-+1",
        "p-a+.+",
        "p-",
        "p-.",
        "p-..",
        "deleted-p-acme-0123",
        "acme",
    ],
)
def test_a_name_no_id_gets_is_no_project_folder(name: str) -> None:
    assert project_of_folder_name(name) is None
