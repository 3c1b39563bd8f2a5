"""`poimen eval` end to end on the embedded engines (PostgreSQL + pgvector, tantivy, MiniLM) and tiny fixtures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.__main__ import main
from app.engines.tantivy_schema import SCHEMA_VERSION, SCHEMA_VERSION_FILE

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eval"

pytestmark = pytest.mark.integration


@pytest.fixture
def eval_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("POIMEN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("OPENSEARCH_URL", raising=False)
    return tmp_path


def test_eval_writes_results_in_the_issue_shape_and_reuses_the_corpus(
    eval_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = eval_env / "out"
    arguments = ["eval", "--dataset", str(FIXTURES / "tiny-beir"), "--output", str(output)]

    first_status = main([*arguments, "--strategies", "semantic,lexical,hybrid", "--fusions", "rrf"])
    first_log = capsys.readouterr().err
    second_status = main([*arguments, "--strategies", "lexical", "--fusions", "rrf"])
    second_log = capsys.readouterr().err

    assert first_status == 0
    assert second_status == 0
    assert "ingested in" in first_log
    assert "already ingested" in second_log
    results = json.loads((output / "results.json").read_text())
    assert results["dataset"] == "tiny-beir"
    assert results["split"] == "test"
    assert results["default"] in results["runs"]
    lexical = results["runs"]["lexical"]
    assert set(lexical) == {"nDCG@10", "MRR@10", "Recall@10", "Recall@100", "P@5", "latency_ms"}
    assert lexical["Recall@10"] == 1.0  # every judged document is found, and q3 never counts itself
    assert set(lexical["latency_ms"]) == {"p50", "p95", "mean"}
    assert (output / "results.png").stat().st_size > 0
    assert "| run |" in (output / "results.md").read_text()
    run_lines = (output / "runs" / "lexical.trec").read_text().splitlines()
    assert run_lines
    assert all(len(line.split()) == 6 for line in run_lines)
    assert run_lines[0].split()[1::2] == ["Q0", "1", "lexical"]  # qid Q0 docid rank score run: rank 1 first


def test_eval_after_a_lexical_format_upgrade_indexes_the_corpus_again_before_scoring(
    eval_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = eval_env / "out"
    arguments = ["eval", "--dataset", str(FIXTURES / "tiny-beir"), "--output", str(output)]
    assert main([*arguments, "--strategies", "lexical", "--fusions", "rrf"]) == 0
    # As an older version left the folder: emptied at open, its projects queued; the corpus marker still matches.
    (version_file,) = (eval_env / "data").rglob(SCHEMA_VERSION_FILE)
    version_file.write_text(f"{SCHEMA_VERSION - 1}\n", encoding="ascii")
    capsys.readouterr()

    status = main([*arguments, "--strategies", "lexical", "--fusions", "rrf"])

    assert status == 0
    assert "already ingested" in capsys.readouterr().err
    assert json.loads((output / "results.json").read_text())["runs"]["lexical"]["Recall@10"] == 1.0
    assert version_file.read_text(encoding="ascii").strip() == str(SCHEMA_VERSION)


def test_eval_on_a_conversational_dataset_reports_categories(eval_env: Path) -> None:
    output = eval_env / "out"

    status = main(
        ["eval", "--dataset", str(FIXTURES / "tiny-chat"), "--output", str(output), "--strategies", "semantic,lexical"]
    )

    assert status == 0
    results = json.loads((output / "results.json").read_text())
    assert results["primary_metric"] == "Recall@10"
    assert "Recall@5" in results["runs"]["lexical"]
    assert set(results["by_category"]["lexical"]) == {"1", "2", "4"}


def test_eval_rejects_a_folder_without_a_dataset(eval_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["eval", "--dataset", str(eval_env)])

    assert status == 2
    assert f"--dataset {eval_env}: no BEIR data set (corpus.jsonl + queries.jsonl) found" in capsys.readouterr().err


def test_a_dataset_refused_in_a_folder_of_datasets_names_the_option_and_the_dataset(
    eval_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(FIXTURES / "tiny-beir", eval_env / "sets" / "good")
    shutil.copytree(FIXTURES / "tiny-beir", eval_env / "sets" / "no-split")
    (eval_env / "sets" / "no-split" / "qrels" / "test.tsv").unlink()

    status = main(["eval", "--dataset", str(eval_env / "sets")])

    errors = capsys.readouterr().err
    assert status == 2
    assert f"--dataset {eval_env / 'sets'}: data set no-split: " in errors
    assert "qrels/test.tsv" in errors
    assert not (eval_env / "data").exists()


def test_a_malformed_dataset_or_an_unwritable_output_is_one_line_before_any_engine_starts(
    eval_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = eval_env / "broken"
    shutil.copytree(FIXTURES / "tiny-beir", broken)
    with (broken / "corpus.jsonl").open("a", encoding="utf-8") as corpus:
        corpus.write('{"_id": "d1", "text": "the same id twice"}\n')
    blocker = eval_env / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")

    malformed = main(["eval", "--dataset", str(broken)])
    malformed_errors = capsys.readouterr().err
    unwritable = main(["eval", "--dataset", str(FIXTURES / "tiny-beir"), "--output", str(blocker / "out")])
    unwritable_errors = capsys.readouterr().err

    assert malformed == 2
    assert f"--dataset {broken}: " in malformed_errors
    assert "corpus.jsonl:8: the corpus id 'd1' appears twice" in malformed_errors
    assert unwritable == 2
    assert f"--output {blocker / 'out'}: cannot write there" in unwritable_errors
    assert "Traceback" not in malformed_errors + unwritable_errors
    assert not (eval_env / "data").exists()  # refused before an engine (or its database) was made


def test_a_dataset_with_nothing_to_score_is_refused_before_any_engine_starts(
    eval_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every run scored 0.0000 and the status was 0: a qrels file of other ids (or space-separated) read as
    # a retrieval that finds nothing.
    unjudged = eval_env / "unjudged"
    shutil.copytree(FIXTURES / "tiny-beir", unjudged)
    (unjudged / "qrels" / "test.tsv").write_text("query-id corpus-id score\nq1 d1 1\n", encoding="utf-8")
    no_corpus = eval_env / "no-corpus"
    shutil.copytree(FIXTURES / "tiny-beir", no_corpus)
    (no_corpus / "corpus.jsonl").write_text("", encoding="utf-8")

    unjudged_status = main(["eval", "--dataset", str(unjudged)])
    unjudged_errors = capsys.readouterr().err
    no_corpus_status = main(["eval", "--dataset", str(no_corpus)])
    no_corpus_errors = capsys.readouterr().err

    assert unjudged_status == 2
    assert f"--dataset {unjudged}: no judged queries" in unjudged_errors
    assert "qrels/test.tsv" in unjudged_errors
    assert no_corpus_status == 2
    assert f"--dataset {no_corpus}: corpus.jsonl holds no documents" in no_corpus_errors
    assert "Traceback" not in unjudged_errors + no_corpus_errors
    assert not (eval_env / "data").exists()  # refused before an engine (or its database) was made
