"""QueryOptimizer: normalisation, entities, classification and the reference routing table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.models import QuestionType, SearchStrategy
from app.query.abbreviations import load_abbreviations
from app.query.optimizer import MAX_LEXICAL_TERMS, PASSAGE_QUERY_TOKENS, QueryOptimizer

NOW = datetime(2025, 3, 12, 15, 30, tzinfo=UTC)  # a Wednesday


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


@pytest.fixture(scope="module")
def optimizer() -> QueryOptimizer:
    return QueryOptimizer(clock=lambda: NOW)


# --- acceptance examples of the reference ---------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "strategy", "question_type", "confidence"),
    [
        ("#networking @devops", SearchStrategy.LEXICAL, QuestionType.NAVIGATIONAL, 0.85),
        ("fix port 2024", SearchStrategy.CASCADING, QuestionType.TROUBLESHOOTING, 0.9),
        ("How do I deploy to K8s?", SearchStrategy.HYBRID, QuestionType.PROCEDURAL, 0.95),
        ("How do I fix kubernetes port 8080?", SearchStrategy.HYBRID, QuestionType.PROCEDURAL, 0.95),
    ],
)
def test_reference_examples_route_as_the_reference_says(
    optimizer: QueryOptimizer, query: str, strategy: SearchStrategy, question_type: QuestionType, confidence: float
) -> None:
    analysis = optimizer.analyze(query)

    assert analysis.strategy is strategy
    assert analysis.question_type is question_type
    assert analysis.confidence == confidence


# --- stages 1-2: normalise and tokenize -----------------------------------------------------------


def test_normalizes_case_and_whitespace(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("  HOW do I FIX  kubernetes PORT 8080 ???  ")

    assert analysis.normalized == "how do i fix kubernetes port 8080 ???"
    assert analysis.tokens == ("how", "do", "i", "fix", "kubernetes", "port", "8080")
    assert analysis.token_count == 7


def test_a_decomposed_query_reads_as_its_precomposed_form(optimizer: QueryOptimizer) -> None:
    decomposed = optimizer.analyze("cafe\u0301 in Zu\u0308rich #Zu\u0308rich")  # e + U+0301, u + U+0308
    precomposed = optimizer.analyze("café in Zürich #Zürich")

    assert decomposed.normalized == precomposed.normalized == "café in zürich #zürich"
    assert decomposed.tokens == precomposed.tokens
    assert decomposed.entities.tags == ("zürich",)


def test_a_word_keeps_its_combining_marks_in_every_script(optimizer: QueryOptimizer) -> None:
    # A vowel sign, tone mark, virama, haraka or point is part of the word, as in Lucene's and tantivy's words:
    # the query cut `किताब` into `क त ब` and `مُحَمَّد` into `م ح د`, words no document holds.
    words = (
        *("किताब", "हिंदी", "पढ़ना"),  # Hindi: vowel signs, anusvara, nukta
        *("ข้าวผัด", "ເຂົ້າໜຽວ", "មិត្តភក្តិ", "ထမင်း"),  # Thai, Lao, Khmer, Burmese
        *("مُحَمَّد", "שָׁלוֹם", "q\u0303"),  # Arabic harakat, Hebrew points, an accent NFC cannot compose
    )
    analysis = optimizer.analyze(" ".join(words) + ' "ข้าวผัด กับ" -हिंदी')

    assert analysis.tokens[: len(words)] == words
    assert analysis.lexical_query.phrases == ("ข้าวผัด กับ",)
    assert analysis.lexical_query.excluded_terms == ("हिंदी",)


def test_capitals_lower_letter_by_letter_as_the_lexical_engines_index_them(optimizer: QueryOptimizer) -> None:
    # Lucene and tantivy index `ΟΔΟΣ` as `οδοσ` and `İstanbul` as `istanbul`; `str.lower` gives `οδος`, `i̇stanbul`.
    analysis = optimizer.analyze('ΟΔΟΣ İstanbul "ΟΔΟΣ Ερμού" -ΚΟΣΜΟΣ')

    assert analysis.tokens[:2] == ("οδοσ", "istanbul")
    assert analysis.lexical_query.phrases == ("οδοσ ερμού",)
    assert analysis.lexical_query.excluded_terms == ("κοσμοσ",)


def test_a_tag_in_the_query_is_keyed_as_stored_tags_are(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("#ΟΔΟΣ #İstanbul street")

    assert analysis.entities.tags == ("οδοσ", "istanbul")  # `app.domain.tags.tag_key` of each, letter by letter


def test_tokens_keep_compound_words_and_sigils(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("kubectl port-forward #net ci/cd node.js")

    assert analysis.tokens == ("kubectl", "port-forward", "#net", "ci/cd", "node.js")


def test_query_syntax_characters_are_plain_words(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("foo:(bar* ~baz")

    assert analysis.tokens == ("foo", "bar", "baz")
    assert analysis.lexical_query.text == "foo bar baz"


# --- stage 3: entities ----------------------------------------------------------------------------


def test_extracts_quoted_phrases_tags_mentions_and_numbers(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze('"Port Forwarding" on 8080 for #Networking by @devops')

    assert analysis.entities.phrases == ("port forwarding",)
    assert analysis.entities.tags == ("networking",)
    assert analysis.entities.mentions == ("devops",)
    assert analysis.entities.numbers == ("8080",)
    assert analysis.has_special_syntax


def test_smart_quotes_make_a_phrase(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("\u201cport forwarding\u201d guide")

    assert analysis.entities.phrases == ("port forwarding",)


def test_unbalanced_quote_is_not_a_phrase(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze('"unbalanced query here')

    assert analysis.entities.phrases == ()
    assert analysis.lexical_query.text == "unbalanced query here"


def test_years_only_between_2000_and_2100_and_not_numbers(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("release 2024 build 1999 and 2101 on 2100")

    assert analysis.entities.years == (2024, 2100)
    assert analysis.entities.numbers == ("1999", "2101")


def test_a_year_is_an_event_time_range_of_that_year(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("fix port 2024")

    assert analysis.event_time_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert analysis.event_time_to == datetime(2025, 1, 1, tzinfo=UTC)


def test_month_and_year_is_that_month(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("outage in january 2024")

    assert analysis.entities.months == (1,)
    assert (analysis.event_time_from, analysis.event_time_to) == (
        datetime(2024, 1, 1, tzinfo=UTC),
        datetime(2024, 2, 1, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("deploys in february", datetime(2025, 2, 1, tzinfo=UTC), datetime(2025, 3, 1, tzinfo=UTC)),
        ("deploys in march", datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC)),
        ("deploys in december", datetime(2024, 12, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_a_month_without_year_is_its_most_recent_occurrence(
    optimizer: QueryOptimizer, query: str, start: datetime, end: datetime
) -> None:
    analysis = optimizer.analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("notes from today", datetime(2025, 3, 12, tzinfo=UTC), datetime(2025, 3, 13, tzinfo=UTC)),
        ("what broke yesterday", datetime(2025, 3, 11, tzinfo=UTC), datetime(2025, 3, 12, tzinfo=UTC)),
        ("changes this week", datetime(2025, 3, 10, tzinfo=UTC), datetime(2025, 3, 17, tzinfo=UTC)),
        ("changes last week", datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 10, tzinfo=UTC)),
        ("incidents this month", datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC)),
        ("incidents last month", datetime(2025, 2, 1, tzinfo=UTC), datetime(2025, 3, 1, tzinfo=UTC)),
        ("goals this year", datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)),
        # "last year" alone runs to the end of today, for its telling (tests/unit/test_query_year_dates.py).
        ("goals last year", datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 3, 13, tzinfo=UTC)),
        ("errors in december last year", datetime(2024, 12, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_relative_dates_resolve_against_the_clock(
    optimizer: QueryOptimizer, query: str, start: datetime, end: datetime
) -> None:
    analysis = optimizer.analyze(query)

    assert analysis.has_date_filters
    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


def test_last_month_in_january_is_december_of_the_previous_year() -> None:
    optimizer = QueryOptimizer(clock=lambda: datetime(2025, 1, 5, tzinfo=UTC))

    analysis = optimizer.analyze("incidents last month")

    assert (analysis.event_time_from, analysis.event_time_to) == (
        datetime(2024, 12, 1, tzinfo=UTC),
        datetime(2025, 1, 1, tzinfo=UTC),
    )


def test_naive_clock_is_taken_as_utc() -> None:
    optimizer = QueryOptimizer(clock=lambda: datetime(2025, 3, 12, 10, 0))  # noqa: DTZ001 - the point of the test

    analysis = optimizer.analyze("notes from today")

    assert analysis.event_time_from == datetime(2025, 3, 12, tzinfo=UTC)


def test_ambiguous_month_words_need_a_date_context(optimizer: QueryOptimizer) -> None:
    assert not optimizer.analyze("may I deploy on friday").has_date_filters
    assert not optimizer.analyze("march the pods to the new cluster").has_date_filters
    assert optimizer.analyze("outage may 2024").entities.months == (5,)
    assert optimizer.analyze("outage in may").entities.months == (5,)
    assert optimizer.analyze("dinner on May 3, 2023").entities.months == (5,)
    assert optimizer.analyze("the movie on 1 May, 2022").entities.months == (5,)
    assert optimizer.analyze("the talk on March 20th").entities.months == (3,)
    assert not optimizer.analyze("may 3d printers melt").has_date_filters
    assert not optimizer.analyze("may 3 replicas be enough").has_date_filters
    assert not optimizer.analyze("we march 5 miles").has_date_filters


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did carol say before April 2024", None, datetime(2024, 5, 1, tzinfo=UTC)),
        ("what did she do the weekend before April 10, 2023", None, datetime(2023, 5, 1, tzinfo=UTC)),
        ("deploys until 2023", None, datetime(2024, 1, 1, tzinfo=UTC)),
        ("what happened prior to March 2024", None, datetime(2024, 4, 1, tzinfo=UTC)),
        ("what has bob said since June 2024", datetime(2024, 6, 1, tzinfo=UTC), None),
        ("the kitchen after May 2024", datetime(2024, 5, 1, tzinfo=UTC), None),
        ("errors since last week", datetime(2025, 3, 3, tzinfo=UTC), None),
        ("the plan for the Saturday after October 28, 2023", datetime(2023, 10, 1, tzinfo=UTC), None),
        # Several dates ask about the span between them; a date not right after the word has no side.
        ("before 2021 and after 2023", datetime(2021, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)),
        (
            "what happened in march before the outage",
            datetime(2025, 3, 1, tzinfo=UTC),
            datetime(2025, 4, 1, tzinfo=UTC),
        ),
        ("notes from today", datetime(2025, 3, 12, tzinfo=UTC), datetime(2025, 3, 13, tzinfo=UTC)),
        # A date and a relative one: the span, as without the words ("not before April 2024" is no date at all:
        # tests/unit/test_query_negated_dates.py).
        ("since May 2024 until yesterday", datetime(2024, 5, 1, tzinfo=UTC), datetime(2025, 3, 12, tzinfo=UTC)),
        ("since last week until today", datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 13, tzinfo=UTC)),
    ],
)
def test_before_and_since_a_date_open_the_range_on_that_side_keeping_the_date(
    optimizer: QueryOptimizer, query: str, start: datetime | None, end: datetime | None
) -> None:
    analysis = optimizer.analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


@pytest.mark.parametrize(
    "query",
    ["since May 2024 until yesterday", "from May 2024 to yesterday", "between May 2024 and yesterday"],
)
def test_a_range_from_a_date_to_a_relative_one_inside_it_is_their_span_not_their_overlap(query: str) -> None:
    optimizer = QueryOptimizer(clock=lambda: datetime(2024, 5, 8, 9, 0, tzinfo=UTC))  # yesterday lies in May 2024

    analysis = optimizer.analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (
        datetime(2024, 5, 1, tzinfo=UTC),
        datetime(2024, 5, 8, tzinfo=UTC),
    )


def test_a_relative_date_inside_a_month_without_range_words_still_narrows_it(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("what broke yesterday in march 2025")

    assert (analysis.event_time_from, analysis.event_time_to) == (
        datetime(2025, 3, 11, tzinfo=UTC),
        datetime(2025, 3, 12, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        (
            "where was she the last week of August 2023",
            datetime(2023, 8, 1, tzinfo=UTC),
            datetime(2023, 9, 1, tzinfo=UTC),
        ),
        ("goals for the last month of 2024", datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_last_week_of_a_named_month_is_in_that_month_not_the_week_before_now(
    optimizer: QueryOptimizer, query: str, start: datetime, end: datetime
) -> None:
    analysis = optimizer.analyze(query)

    assert analysis.entities.relative_dates == ()
    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("yesterday's standup notes", datetime(2025, 3, 11, tzinfo=UTC), datetime(2025, 3, 12, tzinfo=UTC)),
        ("last year's goals", datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 3, 13, tzinfo=UTC)),
        ("2024's roadmap", datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_a_date_with_a_possessive_is_a_date(
    optimizer: QueryOptimizer, query: str, start: datetime, end: datetime
) -> None:
    analysis = optimizer.analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


@pytest.mark.parametrize(
    ("query", "now", "start", "end"),
    [
        # Asked in December, "last December" is the one before, not the month it is asked in.
        ("what broke last december", utc(2024, 12, 20), utc(2023, 12, 1), utc(2024, 1, 1)),
        ("what broke last december", utc(2025, 1, 5), utc(2024, 12, 1), utc(2025, 1, 1)),
        ("what did we plant last march", NOW, utc(2024, 3, 1), utc(2024, 4, 1)),
        ("what did we plant last may", NOW, utc(2024, 5, 1), utc(2024, 6, 1)),
        ("what broke last december 2022", NOW, utc(2022, 12, 1), utc(2023, 1, 1)),
    ],
)
def test_last_and_a_month_is_its_latest_occurrence_before_this_month(
    query: str, now: datetime, start: datetime, end: datetime
) -> None:
    optimizer = QueryOptimizer(clock=lambda: now)

    analysis = optimizer.analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


@pytest.mark.parametrize(
    ("query", "now", "start", "end"),
    [
        ("what changed in the past week", NOW, utc(2025, 3, 5), utc(2025, 3, 13)),
        ("who visited him in the last year", NOW, utc(2024, 3, 12), utc(2025, 3, 13)),
        # Month and year steps keep the day of the month, or the month's last day where it has none.
        ("errors over the last month", utc(2024, 3, 31), utc(2024, 2, 29), utc(2024, 4, 1)),
        ("errors over the past year", utc(2024, 2, 29), utc(2023, 2, 28), utc(2024, 3, 1)),
    ],
)
def test_the_last_or_past_week_month_or_year_is_the_period_up_to_today(
    query: str, now: datetime, start: datetime, end: datetime
) -> None:
    optimizer = QueryOptimizer(clock=lambda: now)

    analysis = optimizer.analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)


def test_the_last_march_is_no_date(optimizer: QueryOptimizer) -> None:
    assert not optimizer.analyze("the last march of the parade").has_date_filters


def test_abbreviations_expand_from_the_data_table(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("How do I deploy to K8s?")

    assert analysis.entities.expansions == {"k8s": "kubernetes"}
    assert analysis.search_text == "how do i deploy to kubernetes?"
    assert analysis.lexical_query.text == "deploy k8s kubernetes"


def test_bundled_abbreviation_table_holds_the_usual_terms() -> None:
    table = load_abbreviations()

    assert table["k8s"] == "kubernetes"
    assert table["pg"] == "postgres"
    assert table["oom"] == "out of memory"
    assert table["ci/cd"] == "continuous integration continuous delivery"
    assert len(table) >= 40


def test_custom_abbreviation_table_replaces_the_bundled_one() -> None:
    optimizer = QueryOptimizer(clock=lambda: NOW, abbreviations={"LB": "load balancer"})

    analysis = optimizer.analyze("lb health for k8s")

    assert analysis.entities.expansions == {"lb": "load balancer"}
    assert analysis.search_text == "load balancer health for k8s"


# --- stage 4: characteristics and negation --------------------------------------------------------


def test_dash_and_upper_case_not_exclude_terms(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("deploy guide -helm NOT docker")

    assert analysis.has_negation
    assert analysis.entities.excluded_terms == ("helm", "docker")
    assert analysis.lexical_query.excluded_terms == ("helm", "docker")
    assert analysis.lexical_query.text == "deploy guide"
    assert analysis.search_text == "deploy guide"


def test_prose_not_is_negation_but_excludes_nothing(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("why is my pod not starting")

    assert analysis.has_negation
    assert analysis.entities.excluded_terms == ()
    assert "not" in analysis.search_text


def test_hyphenated_words_are_not_negations(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("kubectl port-forward service")

    assert not analysis.has_negation
    assert "port-forward" in analysis.lexical_query.text


def test_a_quoted_phrase_after_a_dash_or_not_is_excluded_not_required(optimizer: QueryOptimizer) -> None:
    dashed = optimizer.analyze('consumer lag -"dead letter" queue')
    negated = optimizer.analyze('consumer lag NOT "dead letter"')
    required = optimizer.analyze('consumer lag "dead letter"')

    assert dashed.lexical_query.excluded_terms == negated.lexical_query.excluded_terms == ("dead letter",)
    assert dashed.lexical_query.phrases == negated.lexical_query.phrases == ()
    assert dashed.search_text == "consumer lag queue"
    assert negated.search_text == "consumer lag"
    assert required.lexical_query.phrases == ("dead letter",)
    assert required.lexical_query.excluded_terms == ()


def test_a_dash_before_a_number_is_a_sign_or_a_list_not_an_exclusion(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("Differentiated E2f-1, -2, -3 TKO cells at -5 degrees")

    assert analysis.entities.excluded_terms == ()
    assert not analysis.has_negation


def test_phrase_words_go_to_phrases_not_free_text(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze('restart "crash loop" pods')

    assert analysis.lexical_query.phrases == ("crash loop",)
    assert analysis.lexical_query.text == "restart pods"
    assert analysis.search_text == "restart crash loop pods"


def test_search_text_drops_sigils_but_keeps_the_words(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("#networking policies for @devops")

    assert analysis.search_text == "networking policies for devops"
    assert analysis.lexical_query.text == "networking policies devops"


def test_stop_words_stay_when_nothing_else_is_left(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("the of and")

    assert analysis.lexical_query.text == "the of and"
    assert analysis.token_count == 3


def test_query_without_words_has_no_tokens_and_keeps_its_text(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("\U0001f642\U0001f642")

    assert analysis.tokens == ()
    assert analysis.lexical_query.text == ""
    assert analysis.search_text == "\U0001f642\U0001f642"


# --- stage 5: question type -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "question_type"),
    [
        ("What is a StatefulSet?", QuestionType.FACTUAL),
        ("Define PVC", QuestionType.FACTUAL),
        ("What does idempotency mean?", QuestionType.FACTUAL),
        ("when was the cluster upgraded", QuestionType.FACTUAL),
        ("What is the difference between a pod and a deployment", QuestionType.COMPARATIVE),
        ("Compare Docker vs Kubernetes", QuestionType.COMPARATIVE),
        ("postgres vs mysql for queues", QuestionType.COMPARATIVE),
        ("How do I deploy to Kubernetes?", QuestionType.PROCEDURAL),
        ("Steps to fix port conflicts", QuestionType.PROCEDURAL),
        ("Deploy application guide", QuestionType.PROCEDURAL),
        ("Fix OOMKilled error", QuestionType.TROUBLESHOOTING),
        ("Debug networking issue", QuestionType.TROUBLESHOOTING),
        ("Resolve timeout errors", QuestionType.TROUBLESHOOTING),
        ("ingress is broken again", QuestionType.TROUBLESHOOTING),
        ("Where is the deployment runbook?", QuestionType.NAVIGATIONAL),
        ("Find kubernetes best practices", QuestionType.NAVIGATIONAL),
        ("show me the on-call rota", QuestionType.NAVIGATIONAL),
        ("#networking documents", QuestionType.NAVIGATIONAL),
        ("Tell me about networking", QuestionType.OPEN),
    ],
)
def test_classifies_the_six_question_types(optimizer: QueryOptimizer, query: str, question_type: QuestionType) -> None:
    assert optimizer.analyze(query).question_type is question_type


# --- stage 6: routing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "strategy", "confidence"),
    [
        ("kubernetes", SearchStrategy.HYBRID, 0.8),  # short: hybrid, unlike the reference (recall)
        ("#networking", SearchStrategy.LEXICAL, 0.85),
        ('"port forwarding" on kubernetes', SearchStrategy.LEXICAL, 0.85),  # special syntax alone
        ("#networking changes in 2024", SearchStrategy.CASCADING, 0.9),  # special syntax + date
        ("kubernetes upgrade notes 2023", SearchStrategy.CASCADING, 0.9),  # date
        ("Where is the deployment runbook?", SearchStrategy.CASCADING, 0.85),  # navigational
        ("Fix OOMKilled error now", SearchStrategy.HYBRID, 0.95),  # troubleshooting
        ("Tell me about networking", SearchStrategy.HYBRID, 0.8),  # default
        ("What is a StatefulSet?", SearchStrategy.HYBRID, 0.8),
    ],
)
def test_routes_per_the_reference_decision_tree(
    optimizer: QueryOptimizer, query: str, strategy: SearchStrategy, confidence: float
) -> None:
    analysis = optimizer.analyze(query)

    assert (analysis.strategy, analysis.confidence) == (strategy, confidence)


def test_a_short_query_is_routed_by_what_it_says_not_by_its_length(optimizer: QueryOptimizer) -> None:
    assert optimizer.analyze("2024 outage").strategy is SearchStrategy.CASCADING
    assert optimizer.analyze("outage").strategy is SearchStrategy.HYBRID
    assert optimizer.analyze("#outage").strategy is SearchStrategy.LEXICAL


PASSAGE = (
    'The "precautionary principle" was cited by @regulators in 2019: banning #glyphosate would -cost farmers '
    "little, NOT least because alternatives exist. Opponents answer that the evidence on cancer is weak, "
    "that the cost to farmers is real, and that a ban on glyphosate would raise the use of tillage."
)


def test_a_passage_is_read_as_prose_and_always_runs_hybrid(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze(PASSAGE)

    assert analysis.token_count >= PASSAGE_QUERY_TOKENS
    assert analysis.strategy is SearchStrategy.HYBRID
    assert not analysis.has_special_syntax
    assert not analysis.has_date_filters
    assert analysis.event_time_from is None
    assert analysis.event_time_to is None
    lexical = analysis.lexical_query
    assert lexical.phrases == ()  # a quotation, not an exact-match demand that empties the lexical leg
    assert lexical.excluded_terms == ()
    words = lexical.text.split()
    assert {"precautionary", "principle", "regulators", "glyphosate", "cost", "least", "tillage"} <= set(words)
    # What a paragraph repeats weighs more in BM25: each word stays as often as the passage says it.
    assert lexical.weigh_repeats
    assert words.count("glyphosate") == 2
    assert words.count("farmers") == 2
    assert words.count("tillage") == 1


def test_a_short_query_names_each_word_once(optimizer: QueryOptimizer) -> None:
    lexical = optimizer.analyze("glyphosate ban glyphosate tillage").lexical_query

    assert lexical.text.split() == ["glyphosate", "ban", "tillage"]
    assert not lexical.weigh_repeats


def test_the_same_syntax_in_a_short_query_is_still_syntax(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze('"precautionary principle" -cost #glyphosate')

    assert analysis.strategy is SearchStrategy.LEXICAL
    assert analysis.lexical_query.phrases == ("precautionary principle",)
    assert analysis.lexical_query.excluded_terms == ("cost",)


def test_a_very_long_passage_keeps_its_most_frequent_words_for_bm25(optimizer: QueryOptimizer) -> None:
    rare = [f"word{number}" for number in range(MAX_LEXICAL_TERMS + 50)]
    passage = " ".join(["glyphosate tillage"] * 3 + rare)

    words = optimizer.analyze(passage).lexical_query.text.split()

    assert len(set(words)) == MAX_LEXICAL_TERMS
    assert words[:7] == ["glyphosate", "tillage"] * 3 + ["word0"]  # the repeated words with their repeats
    assert words[-1] == f"word{MAX_LEXICAL_TERMS - 3}"  # then the first seen of the rest


def test_analysis_keeps_the_raw_query(optimizer: QueryOptimizer) -> None:
    assert optimizer.analyze("  Raw Query  ").raw_query == "  Raw Query  "
