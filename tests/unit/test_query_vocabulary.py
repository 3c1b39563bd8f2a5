"""A deployment's query vocabulary (`QUERY_VOCABULARY_PATH`): loading and checking the file, extend vs
replace, and listed names read as one name in any case, with the boosts a capitalised name gets."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import ValidationError

from app.config import ConfigurationError, Settings
from app.domain.models import Chunk, FusedHit
from app.knobs import SearchKnobs
from app.query.abbreviations import load_abbreviations
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan
from app.retrieval.evidence import prefer_evidence
from app.wiring.vocabulary import build_query_optimizer, read_query_vocabulary

if TYPE_CHECKING:
    from pathlib import Path


def vocabulary_file(tmp_path: Path, content: Any, *, name: str = "vocabulary.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def settings_for(path: Path | None, **values: Any) -> Settings:
    return Settings(_env_file=None, query_vocabulary_path=path, **values)


def test_a_vocabulary_file_is_read_with_terms_lowercased_and_names_as_written(tmp_path: Path) -> None:
    path = vocabulary_file(
        tmp_path, {"abbreviations": {"PMX": "Poimen  Memory Index", "ci/cd": "pipelines"}, "entities": ["Blue Harbor"]}
    )

    vocabulary = read_query_vocabulary(path)

    assert dict(vocabulary.abbreviations) == {"pmx": "poimen memory index", "ci/cd": "pipelines"}
    assert vocabulary.entities == ("Blue Harbor",)


def test_the_file_is_read_once_per_process(tmp_path: Path) -> None:
    path = vocabulary_file(tmp_path, {"entities": ["poimen"]})
    first = read_query_vocabulary(path)
    path.write_text("not json any more", encoding="utf-8")

    assert read_query_vocabulary(path) is first


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "not JSON"),
        ("[]", "expected one JSON object"),
        ({}, "holds neither 'abbreviations' nor 'entities'"),
        ({"abbreviations": {}, "synonyms": {}}, "unknown key(s) 'synonyms'"),
        ({"abbreviations": ["k8s"]}, "abbreviations: expected an object"),
        ({"abbreviations": {"": "nothing"}}, "abbreviations['']: empty"),
        ({"abbreviations": {"  ": "nothing"}}, "abbreviations['  ']: empty"),
        ({"abbreviations": {"k8s": ""}}, "abbreviations['k8s']: empty"),
        ({"abbreviations": {"k8s": 8}}, "abbreviations['k8s']: expected a string, got int"),
        ({"abbreviations": {"load balancer": "lb"}}, "abbreviations['load balancer']: not one word"),
        ({"abbreviations": {"#k8s": "kubernetes"}}, "abbreviations['#k8s']: not one word"),
        ({"abbreviations": {"K8S": "kubernetes", "k8s": "kube"}}, "abbreviations['k8s']: listed twice"),
        ('{"abbreviations": {"k8s": "a", "k8s": "b"}}', "key 'k8s' appears twice"),
        ({"entities": "poimen"}, "entities: expected a list of names, got str"),
        ({"entities": ["poimen", ""]}, "entities[1]: empty"),
        ({"entities": [["poimen"]]}, "entities[0]: expected a string, got list"),
        ({"entities": ["C++"]}, "entities[0] 'C++': not made of words the query reader sees"),
        ({"entities": ["3M"]}, "entities[0] '3M': not made of words"),
        ({"entities": ["Blue Harbor", "blue  harbor"]}, "entities[1] 'blue harbor': listed twice"),
        ({"entities": ["x" * 201]}, "entities[0]: longer than 200 characters"),
    ],
)
def test_a_bad_file_stops_start_up_naming_the_file_and_the_entry(tmp_path: Path, content: Any, said: str) -> None:
    path = vocabulary_file(tmp_path, content)

    with pytest.raises(ConfigurationError) as raised:
        build_query_optimizer(settings_for(path))

    assert str(raised.value).startswith(f"QUERY_VOCABULARY_PATH {path}: ")
    assert said in str(raised.value)


def test_a_listed_name_may_start_with_a_letter_of_any_script(tmp_path: Path) -> None:
    optimizer = build_query_optimizer(settings_for(vocabulary_file(tmp_path, {"entities": ["Élodie Durand"]})))

    assert optimizer.analyze("what did élodie durand say").names == ("elodie durand",)
    assert optimizer.analyze("what did elodie durand say").names == ("elodie durand",)


def test_a_missing_or_undecodable_file_stops_start_up(tmp_path: Path) -> None:
    binary = tmp_path / "latin1.json"
    binary.write_bytes(b'{"entities": ["caf\xe9"]}')

    with pytest.raises(ConfigurationError, match=r"QUERY_VOCABULARY_PATH .*missing\.json: cannot read"):
        build_query_optimizer(settings_for(tmp_path / "missing.json"))
    with pytest.raises(ConfigurationError, match=r"latin1\.json: not UTF-8 text"):
        build_query_optimizer(settings_for(binary))
    with pytest.raises(ConfigurationError, match=r"QUERY_VOCABULARY_PATH .*: cannot read"):
        build_query_optimizer(settings_for(tmp_path))  # a folder


def test_replace_without_a_file_is_refused() -> None:
    with pytest.raises(ValidationError, match="QUERY_VOCABULARY_MODE=replace needs QUERY_VOCABULARY_PATH"):
        Settings(_env_file=None, query_vocabulary_mode="replace")
    with pytest.raises(ValidationError, match="query_vocabulary_mode"):
        Settings(_env_file=None, query_vocabulary_mode="merge")


def test_an_empty_path_is_unset() -> None:
    assert Settings(_env_file=None, query_vocabulary_path=" ").query_vocabulary_path is None


def test_extend_adds_to_the_bundled_table_and_overrides_its_terms(tmp_path: Path) -> None:
    path = vocabulary_file(tmp_path, {"abbreviations": {"pmx": "poimen memory index", "pg": "procter gamble"}})
    optimizer = build_query_optimizer(settings_for(path, query_vocabulary_mode="extend"))

    analysis = optimizer.analyze("pmx on k8s for pg")

    assert dict(analysis.entities.expansions) == {
        "pmx": "poimen memory index",
        "k8s": "kubernetes",
        "pg": "procter gamble",
    }
    assert analysis.search_text == "poimen memory index on kubernetes for procter gamble"
    assert set(analysis.lexical_query.text.split()) >= {"pmx", "poimen", "memory", "index", "procter", "gamble"}


def test_replace_drops_the_bundled_table(tmp_path: Path) -> None:
    path = vocabulary_file(tmp_path, {"abbreviations": {"pmx": "poimen memory index"}})
    optimizer = build_query_optimizer(settings_for(path, query_vocabulary_mode="replace"))

    analysis = optimizer.analyze("pmx on k8s")

    assert dict(analysis.entities.expansions) == {"pmx": "poimen memory index"}
    assert "kubernetes" not in analysis.search_text


def test_no_file_is_the_bundled_table_alone() -> None:
    optimizer = build_query_optimizer(settings_for(None))

    assert optimizer.analyze("k8s").entities.expansions == {"k8s": "kubernetes"}
    assert len(load_abbreviations()) == 50


def test_a_listed_lowercase_name_is_recognised_as_one_name(tmp_path: Path) -> None:
    path = vocabulary_file(tmp_path, {"entities": ["poimen", "Blue Harbor", "blue harbor tours"]})
    listed = build_query_optimizer(settings_for(path))
    bundled = QueryOptimizer()

    assert listed.analyze("what did poimen ship at blue harbor's dock").names == ("poimen", "blue harbor")
    assert bundled.analyze("what did poimen ship at blue harbor's dock").names == ()
    assert listed.analyze("Who runs Blue Harbor Tours?").names == ("blue harbor tours",)
    assert bundled.analyze("Who runs Blue Harbor Tours?").names == ("blue", "harbor", "tours")
    assert listed.analyze("poimenx and harbor").names == ()  # whole words only


def chunk_hit(chunk_id: str, score: float, text: str, title: str = "") -> FusedHit:
    chunk = Chunk(
        chunk_id=chunk_id,
        document_id=chunk_id,
        project_id="p",
        text=text,
        source=f"{chunk_id}.md",
        level="L1",
        breadcrumb=(title,) if title else (),
        section_title=title,
        position=0,
    )
    return FusedHit(chunk=chunk, score=score, ranks={}, leg_scores={}, contributions={"semantic": score})


def test_a_listed_name_gets_the_mention_and_title_boosts_a_capitalised_name_gets() -> None:
    knobs = SearchKnobs(evidence_mention_boost=0.5, evidence_speaker_boost=0.5)
    hits = [
        chunk_hit("other", 1.0, "release notes of the harbour tools"),
        chunk_hit("mention", 0.8, "what the blue harbor team shipped"),
        chunk_hit("title", 0.7, "shipped the release", title="Blue Harbor"),
    ]
    query = "what did blue harbor ship"
    listed = QueryOptimizer(listed_names=["blue harbor"]).analyze(query)
    unlisted = QueryOptimizer().analyze(query)
    capitalised = QueryOptimizer().analyze("what did Harbor ship")

    plans = [build_plan(analysis, SearchOptions(project="p"), knobs) for analysis in (listed, unlisted, capitalised)]
    orders = [[hit.chunk_id for hit in prefer_evidence(hits, plan.evidence)] for plan in plans]

    assert plans[0].evidence.names == ("blue harbor",)
    assert orders == [["mention", "title", "other"], ["other", "mention", "title"], ["mention", "title", "other"]]
    boosted = {hit.chunk_id: hit.contributions for hit in prefer_evidence(hits, plans[0].evidence)}
    assert (boosted["mention"]["mention"], boosted["title"]["entity"]) == (0.5, 0.5)
