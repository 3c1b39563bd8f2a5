"""The search console in a real headless Chromium against a real service: load, search, legs, documents, errors."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PROJECT, screenshot

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def search(page: Page, query: str, *, project: str = PROJECT, strategy: str = "hybrid") -> None:
    page.fill("#project", project)
    page.fill("#query", query)
    page.select_option("#strategy", strategy)
    page.click("#search-button")


def test_the_page_loads_with_its_form_and_no_script_error(page: Page) -> None:
    expect(page).to_have_title("Poimen search console")
    expect(page.locator("#search-form")).to_be_visible()
    expect(page.locator("#status")).to_have_text("Type a query and press Search.")
    expect(page.locator("#error")).to_be_hidden()


def test_a_search_renders_fused_hits_with_breakdowns_and_both_legs(page: Page) -> None:
    search(page, "painted lake sunrise")

    hits = page.locator("#fused-list li.hit")
    expect(hits.first).to_be_visible()
    expect(hits.first.locator(".breakdown table tr")).to_have_count(3)
    expect(page.locator("#leg-semantic .leg-list li[data-id]").first).to_be_visible()
    expect(page.locator("#leg-lexical .leg-list li[data-id]").first).to_be_visible()
    expect(page.locator("#strategy-run")).to_have_text("Hybrid")
    expect(page.locator("#timings-body .timing")).to_have_count(6)
    expect(page.locator("#legs-caption")).to_contain_text("found by both")
    # The lexical leg misses the paraphrase ("watercolour of dawn above still water"); the semantic leg has it.
    expect(page.locator("#leg-semantic li.only", has_text="chat/s2/t1")).to_have_count(1)
    expect(page.locator("#leg-lexical li[data-id]", has_text="chat/s2/t1")).to_have_count(0)
    expect(page.locator("#degraded")).to_be_hidden()
    screenshot(page, "search")


def test_a_hit_opens_its_document_with_the_hit_chunk_marked(page: Page) -> None:
    search(page, "port 8080 is taken")
    expect(page.locator("#fused-list li.hit").first).to_be_visible()

    page.locator("#fused-list li.hit").first.locator("a.doc").click()

    expect(page.locator("#document")).to_be_visible()
    expect(page.locator("#document-caption")).to_have_text(f"{PROJECT} / runbooks/ports")
    expect(page.locator("#document-chunks li.hit-chunk")).to_have_count(1)
    expect(page.locator("#document-chunks")).to_contain_text("lsof -i :8080")
    screenshot(page, "document")


def test_a_document_opened_from_the_keyboard_takes_the_focus_into_its_view(page: Page) -> None:
    search(page, "port 8080 is taken")
    link = page.locator("#fused-list li.hit").first.locator("a.doc")
    link.focus()

    link.press("Enter")

    # The view scrolled into sight while the focus stayed on the link, far above: Tab went on from there.
    expect(page.locator("#document-caption")).to_have_text(f"{PROJECT} / runbooks/ports")
    expect(page.locator("#document :focus")).to_have_count(1)
    expect(page.locator("#document-heading")).to_be_focused()


def test_closing_the_document_returns_the_focus_to_the_link_that_opened_it(page: Page) -> None:
    search(page, "port 8080 is taken")
    link = page.locator("#leg-lexical .leg-list a.doc").first
    link.focus()
    link.press("Enter")
    expect(page.locator("#document")).to_be_visible()

    page.locator("#document-close").press("Enter")

    # It went to <body>: a keyboard user started again from the top of the page.
    expect(page.locator("#document")).to_be_hidden()
    expect(link).to_be_focused()


def test_closing_a_document_whose_link_a_browse_replaced_focuses_the_query(page: Page) -> None:
    page.fill("#project", PROJECT)
    page.click("#browse-button")
    page.locator("#documents-list a.doc").first.click()
    expect(page.locator("#document")).to_be_visible()
    page.click("#browse-button")  # lists the project again: the link that opened the view is gone
    expect(page.locator("#documents-list li")).to_have_count(6)

    page.locator("#document-close").click()

    expect(page.locator("#query")).to_be_focused()


def test_each_search_names_its_query_in_the_page_title_and_back_restores_it(page: Page) -> None:
    # Every history entry was titled "Poimen search console", whatever it searched.
    search(page, "port 8080 is taken")
    expect(page).to_have_title(searched_title("port 8080 is taken"))
    search(page, "pottery\n  class   bowl")
    expect(page).to_have_title(searched_title("pottery class bowl"))

    page.go_back()
    expect(page).to_have_title(searched_title("port 8080 is taken"))
    page.go_back()
    expect(page).to_have_title("Poimen search console")


def test_a_long_query_is_cut_short_in_the_page_title(page: Page) -> None:
    search(page, "lake " * 40)

    expect(page).to_have_title(searched_title(f"{'lake ' * 11}lake…"))


def test_a_long_query_is_cut_in_the_page_title_between_characters_as_they_are_seen(page: Page) -> None:
    # The cut counted UTF-16 units: it kept half of the emoji (a lone surrogate) or a Thai letter without its mark.
    search(page, "a" * 58 + "\U0001f469\u200d\U0001f4bb dev")
    expect(page).to_have_title(searched_title("a" * 58 + "\U0001f469\u200d\U0001f4bb…"))
    search(page, "a" * 58 + "\u0e02\u0e49\u0e32\u0e27 and more")
    expect(page).to_have_title(searched_title("a" * 58 + "\u0e02\u0e49…"))


def searched_title(query: str) -> str:
    """The page's title after a search: its query isolated (FSI ... PDI), as the status line's <bdi> does."""
    return f"“\u2068{query}\u2069” \u2013 Poimen search console"  # an en dash


def test_browsing_lists_the_projects_documents_and_says_so_after_a_failed_search(page: Page) -> None:
    search(page, "anything", project="not a project!")
    expect(page.locator("#status")).to_have_text("The last request failed.")
    page.fill("#project", PROJECT)

    page.click("#browse-button")

    expect(page.locator("#documents-list li")).to_have_count(6)
    expect(page.locator("#documents-list")).to_contain_text("notes/pottery")
    expect(page.locator("#documents-list")).to_contain_text("(1 chunk)")
    expect(page.locator("#status")).to_have_text(f"6 documents of {PROJECT} listed.")


def test_an_error_shows_the_problems_detail_and_field_instead_of_the_last_answer(page: Page) -> None:
    search(page, "pottery bowl")
    expect(page.locator("#fused-list li.hit").first).to_be_visible()

    search(page, "anything", project="not a project!")

    error = page.locator("#error")
    expect(error).to_be_visible()
    expect(error.locator("strong")).to_have_text("Invalid request (400)")
    expect(error.locator(".detail")).to_contain_text("project")
    expect(error).to_contain_text("Field: project")
    expect(error).not_to_contain_text("null")
    expect(page.locator("#fused")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("The last request failed.")
    screenshot(page, "error")


def test_a_document_deleted_since_the_search_is_a_readable_404(page: Page, console_url: str) -> None:
    url = f"{console_url}/v1/projects/{PROJECT}/documents"
    note = {"id": "notes/ephemeral", "text": "A teapot glazed in celadon, fired once and sold."}
    assert httpx.post(url, json=note, timeout=30).status_code == 201
    search(page, "celadon teapot", strategy="semantic")
    expect(page.locator("#fused-list li.hit").first).to_contain_text("celadon")
    assert httpx.delete(f"{url}/notes/ephemeral", timeout=30).status_code == 204

    page.locator("#fused-list li.hit").first.locator("a.doc").click()

    expect(page.locator("#error strong")).to_have_text("Not found (404)")
    expect(page.locator("#error .detail")).to_contain_text(f"in project '{PROJECT}'")
    expect(page.locator("#document")).to_be_hidden()


def test_the_token_stays_in_session_storage_and_is_sent_as_a_bearer(page: Page) -> None:
    page.fill("#token", "secret-token")
    with page.expect_request("**/v1/search") as sent:
        search(page, "pottery bowl")

    assert sent.value.headers["authorization"] == "Bearer secret-token"
    assert page.evaluate("window.localStorage.length") == 0
    assert page.evaluate("sessionStorage.getItem('poimen.console.token')") == "secret-token"


def test_a_weight_typed_alone_is_sent_alone(page: Page) -> None:
    page.fill("#weight-semantic", "0.25")
    with page.expect_request("**/v1/search") as sent:
        search(page, "pottery bowl")

    # The service gives the blank leg the complement (0.75); the page once sent 1.0 for it.
    assert sent.value.post_data_json["weights"] == {"semantic": 0.25}
    expect(page.locator("#fused-list li.hit").first).to_be_visible()


def test_fusion_boxes_a_strategy_cannot_use_are_greyed_out_and_not_sent(page: Page) -> None:
    # The service refuses fusion options beside a strategy that fuses nothing: the page sent them anyway.
    page.select_option("#fusion", "rrf")
    page.fill("#weight-semantic", "0.25")
    page.fill("#rrf-k", "30")
    with page.expect_request("**/v1/search") as sent:
        search(page, "pottery bowl", strategy="lexical")

    assert sent.value.post_data_json["strategy"] == "lexical"
    assert {"fusion", "weights", "rrf_k"}.isdisjoint(sent.value.post_data_json)
    for box in ("#fusion", "#weight-semantic", "#weight-lexical", "#rrf-k"):
        expect(page.locator(box)).to_be_disabled()
    expect(page.locator("#fused-list li.hit").first).to_be_visible()

    page.select_option("#strategy", "hybrid")
    page.select_option("#fusion", "zscore")  # RRF's k is RRF's alone
    expect(page.locator("#rrf-k")).to_be_disabled()
    expect(page.locator("#weight-semantic")).to_be_enabled()
    with page.expect_request("**/v1/search") as sent:
        page.click("#search-button")
    assert sent.value.post_data_json["fusion"] == "zscore"
    assert "rrf_k" not in sent.value.post_data_json


def test_the_to_date_includes_its_day(page: Page) -> None:
    page.fill("#date-from", "2024-05-08")
    page.fill("#date-to", "2024-05-08")  # one day: the service's end is exclusive, so the next midnight is sent
    with page.expect_request("**/v1/search") as sent:
        search(page, "pottery bowl")

    filters = sent.value.post_data_json["filters"]
    assert (filters["date_from"], filters["date_to"]) == ("2024-05-08T00:00:00Z", "2024-05-09T00:00:00Z")
    expect(page.locator("#error")).to_be_hidden()


def test_a_weight_that_is_not_a_number_is_an_error_not_a_default(page: Page) -> None:
    sent = []
    page.on("request", lambda request: sent.append(request.url) if "/v1/search" in request.url else None)
    page.locator("#weight-semantic").press_sequentially("1e")  # the browser reads the box as empty

    search(page, "pottery bowl")

    expect(page.locator("#error .detail")).to_have_text("Semantic weight: not a number")
    expect(page.locator("#weight-semantic")).to_be_focused()
    assert sent == []


def test_enter_in_the_query_searches_and_the_hit_opens_in_the_answers_project(page: Page) -> None:
    page.fill("#project", PROJECT)
    page.fill("#query", "port 8080 is taken")
    page.press("#query", "Enter")
    expect(page.locator("#fused-list li.hit").first).to_be_visible()
    expect(page.locator("#status")).to_contain_text("“port 8080 is taken” in")

    page.fill("#project", "another-project")  # typed after the search: the hits are still the first project's
    page.locator("#fused-list li.hit").first.locator("a.doc").click()

    expect(page.locator("#document-caption")).to_have_text(f"{PROJECT} / runbooks/ports")
    expect(page.locator("#document-chunks li.hit-chunk")).to_have_count(1)


def test_one_long_word_does_not_widen_the_page(page: Page) -> None:
    search(page, "x" * 700)  # echoed in the status line, as a long URL in a hit's text or source would be
    expect(page.locator("#fused-list li.hit").first).to_be_visible()

    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_project_without_documents_says_so_and_a_new_search_closes_the_open_document(page: Page) -> None:
    search(page, "port 8080 is taken")
    page.locator("#fused-list li.hit").first.locator("a.doc").click()
    expect(page.locator("#document")).to_be_visible()

    search(page, "port 8080 is taken", project="no-such-project")

    expect(page.locator("#status")).to_contain_text("project no-such-project holds no documents")
    expect(page.locator("#document")).to_be_hidden()


def test_a_link_to_a_search_fills_the_form_and_runs_it(page: Page) -> None:
    page.goto(f"/console?project={PROJECT}&query=port+8080+is+taken&strategy=lexical&limit=1&fusion=no-such")
    page.wait_for_selector("body[data-ready='true']")

    expect(page.locator("#fused-list li.hit")).to_have_count(1)
    expect(page.locator("#strategy-run")).to_have_text("Lexical")
    expect(page.locator("#query")).to_have_value("port 8080 is taken")
    expect(page.locator("#limit")).to_have_value("1")
    expect(page.locator("#fusion")).to_have_value("")  # a value the select does not offer: the service default


def test_each_search_gets_an_address_and_back_returns_to_the_one_before(page: Page) -> None:
    search(page, "port 8080 is taken")
    expect(page.locator("#status")).to_contain_text("“port 8080 is taken”")
    search(page, "pottery class bowl")
    expect(page.locator("#status")).to_contain_text("“pottery class bowl”")
    assert "query=pottery+class+bowl" in page.url
    assert "token" not in page.url

    page.go_back()
    expect(page.locator("#status")).to_contain_text("“port 8080 is taken”")
    expect(page.locator("#query")).to_have_value("port 8080 is taken")
    page.go_back()
    expect(page.locator("#status")).to_have_text("Type a query and press Search.")
    expect(page.locator("#fused")).to_be_hidden()
    page.go_forward()
    expect(page.locator("#status")).to_contain_text("“port 8080 is taken”")


def test_an_answer_arriving_after_a_later_search_started_is_not_shown(page: Page) -> None:
    held = []

    def hold_the_first(route) -> None:
        if not held and "painted lake" in (route.request.post_data or ""):
            held.append(route)  # answered only once the later search has been shown
        else:
            route.continue_()

    page.route("**/v1/search", hold_the_first)
    search(page, "painted lake sunrise")
    page.fill("#query", "port 8080 is taken")
    page.press("#query", "Enter")
    expect(page.locator("#status")).to_contain_text("“port 8080 is taken”")

    with page.expect_response(lambda response: "painted lake" in (response.request.post_data or "")):
        held[0].continue_()
    expect(page.locator("#search-button")).to_be_enabled()  # both searches have ended

    expect(page.locator("#status")).to_contain_text("“port 8080 is taken”")
    expect(page.locator("#fused-list li.hit").first).to_contain_text("runbooks/ports")
    assert "query=port+8080+is+taken" in page.url


def test_a_token_no_header_can_carry_is_refused_without_being_quoted(page: Page) -> None:
    sent = []
    page.on("request", lambda request: sent.append(request.url) if "/v1/" in request.url else None)
    page.fill("#token", "s3cret-tök€n")  # "€" is beyond Latin-1: fetch refused it, read as "Service unreachable"

    search(page, "pottery bowl")

    error = page.locator("#error")
    expect(error.locator("strong")).to_have_text("Invalid token")
    expect(error.locator(".detail")).to_contain_text("The token cannot be sent")
    expect(error).not_to_contain_text("s3cret")
    expect(error).not_to_contain_text("unreachable")
    assert sent == []


def test_the_last_day_there_is_as_to_date_bounds_nothing(page: Page) -> None:
    page.fill("#date-to", "9999-12-31")  # its next midnight was sent as "+010000-01-01T00:00:00Z"
    with page.expect_request("**/v1/search") as sent:
        search(page, "pottery bowl")

    assert "filters" not in sent.value.post_data_json
    expect(page.locator("#fused-list li.hit").first).to_be_visible()
    expect(page.locator("#error")).to_be_hidden()


@pytest.mark.parametrize(("box", "label"), [("date-from", "From"), ("date-to", "To (the day included)")])
def test_a_day_with_a_five_digit_year_is_an_error_in_the_page_not_a_request(page: Page, box: str, label: str) -> None:
    # The date box's year takes six digits: a From of year 20245 was sent and refused (a 400), a To threw
    # RangeError "Invalid time value" from the day-after computation.
    sent = []
    page.on("request", lambda request: sent.append(request.url) if "/v1/" in request.url else None)
    page.fill(f"#{box}", "20245-05-08")

    search(page, "pottery bowl")

    expect(page.locator("#error strong")).to_have_text("Invalid input")
    expect(page.locator("#error .detail")).to_have_text(
        f"{label}: a day from 0001-01-01 to 9999-12-31 (a year of four digits)"
    )
    expect(page.locator(f"#{box}")).to_be_focused()
    assert sent == []


def test_a_success_answer_that_is_not_json_is_a_readable_error(page: Page, console_url: str) -> None:
    # What a proxy's or a login page's "200 OK" looks like: this service's own HTML page, answered in its place.
    page.route("**/v1/projects/*/documents?*", lambda route: route.continue_(url=f"{console_url}/console"))
    page.fill("#project", PROJECT)

    page.click("#browse-button")

    error = page.locator("#error")
    expect(error.locator("strong")).to_have_text("Unreadable answer (200)")
    expect(error.locator(".detail")).to_contain_text(f"GET /v1/projects/{PROJECT}/documents is not JSON (text/html")
    expect(page.locator("#status")).to_have_text("The last request failed.")


def test_browse_trims_the_project_as_search_does(page: Page) -> None:
    page.fill("#project", f"  {PROJECT} ")  # as pasted; the search sent it trimmed, Browse refused it

    page.click("#browse-button")

    expect(page.locator("#status")).to_have_text(f"6 documents of {PROJECT} listed.")
    expect(page.locator("#error")).to_be_hidden()
    expect(page.locator("#project")).to_have_value(PROJECT)


def test_a_document_answer_arriving_after_a_later_click_is_not_shown(page: Page) -> None:
    held = []

    def hold_the_kayak(route) -> None:
        if not held and route.request.url.endswith("/documents/notes/kayak"):
            held.append(route)  # answered only once the document clicked later is shown
        else:
            route.continue_()

    page.route("**/v1/projects/*/documents/**", hold_the_kayak)
    page.fill("#project", PROJECT)
    page.click("#browse-button")
    page.locator("#documents-list a.doc", has_text="notes/kayak").click()
    page.locator("#documents-list a.doc", has_text="notes/pottery").click()
    expect(page.locator("#document-caption")).to_have_text(f"{PROJECT} / notes/pottery")

    with page.expect_response(lambda response: response.url.endswith("/documents/notes/kayak")):
        held[0].continue_()
    expect(page.locator("#document")).not_to_have_attribute("aria-busy", "true")  # both requests have ended

    expect(page.locator("#document-caption")).to_have_text(f"{PROJECT} / notes/pottery")
    expect(page.locator("#document-chunks")).to_contain_text("blue glaze")


def test_a_more_page_arriving_after_a_later_browse_is_not_appended(page: Page, console_url: str) -> None:
    project = "console-many"  # one page (50) and one more document, kept apart from PROJECT's six
    documents = [{"id": f"many/{number:02d}", "text": f"Note number {number}."} for number in range(51)]
    response = httpx.post(f"{console_url}/v1/projects/{project}/documents", json={"documents": documents}, timeout=120)
    assert response.status_code == 201, response.text
    held = []
    page.route(
        "**/v1/projects/*/documents?*",
        lambda route: held.append(route) if "cursor=" in route.request.url else route.continue_(),
    )
    page.fill("#project", project)
    page.click("#browse-button")
    expect(page.locator("#documents-list li")).to_have_count(50)
    page.click("#documents-more")  # held until PROJECT has been browsed
    page.fill("#project", PROJECT)
    page.click("#browse-button")
    expect(page.locator("#status")).to_have_text(f"6 documents of {PROJECT} listed.")

    with page.expect_response(lambda response: "cursor=" in response.url):
        held[0].continue_()
    expect(page.locator("#documents-more")).to_be_enabled()  # the More request has ended

    expect(page.locator("#documents-list li")).to_have_count(6)
    expect(page.locator("#documents-list")).not_to_contain_text("many/")
    expect(page.locator("#status")).to_have_text(f"6 documents of {PROJECT} listed.")


RIGHT_TO_LEFT_OVERRIDE = "\u202e"

# The left edge (CSS px) of where `text` is drawn inside `root`, found in its text nodes.
LEFT_OF_TEXT = """(root, text) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const at = node.data.indexOf(text);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + text.length);
        return range.getBoundingClientRect().left;
    }
    return null;
}"""


def left_of(page: Page, selector: str, text: str) -> float:
    left = page.locator(selector).evaluate(LEFT_OF_TEXT, text)
    assert left is not None, f"{text!r} not in {selector}"
    return left


def test_a_right_to_left_override_in_an_id_or_title_does_not_reorder_the_line(page: Page, console_url: str) -> None:
    project = "console-bidi"
    document = {"id": f"rtl/{RIGHT_TO_LEFT_OVERRIDE}idab", "title": f"{RIGHT_TO_LEFT_OVERRIDE}titab", "text": "Plain."}
    response = httpx.post(f"{console_url}/v1/projects/{project}/documents", json=document, timeout=60)
    assert response.status_code == 201, response.text
    page.fill("#project", project)

    page.click("#browse-button")
    page.locator("#documents-list a.doc").click()

    # Left to right as written: id, title, chunk count; the override once ran on to the end of the line.
    row = "#documents-list li"
    assert left_of(page, row, "rtl/") < left_of(page, row, "titab") < left_of(page, row, "(1 chunk)")
    expect(page.locator("#document-caption")).to_have_text(f"{project} / {document['id']}")


def test_a_right_to_left_override_in_the_query_does_not_reorder_the_status_line(page: Page) -> None:
    search(page, f"{RIGHT_TO_LEFT_OVERRIDE}pottery bowl")
    expect(page.locator("#status")).to_contain_text("round trip")

    # Left to right as written: the query, then the project and the count; the override once ran on to
    # the end of the line, drawing "round trip" leftmost.
    status = "#status"
    assert (
        left_of(page, status, "pottery") < left_of(page, status, f"in {PROJECT}") < left_of(page, status, "round trip")
    )


def test_the_document_view_shows_the_metadata_as_text(page: Page, console_url: str) -> None:
    project = "console-metadata"
    metadata = {"author": "<b>Melanie</b>", "pages": 3}
    document = {"id": "notes/meta", "text": "A note that carries metadata.", "metadata": metadata}
    response = httpx.post(f"{console_url}/v1/projects/{project}/documents", json=document, timeout=60)
    assert response.status_code == 201, response.text
    page.fill("#project", project)
    page.click("#browse-button")

    page.locator("#documents-list a.doc").click()

    shown = page.locator("#document-meta dd.metadata")
    expect(shown).to_contain_text('"author": "<b>Melanie</b>"')  # markup in a value is shown, never run
    expect(shown).to_contain_text('"pages": 3')
    expect(page.locator("#document-meta b")).to_have_count(0)


def test_a_reranked_answer_shows_each_hits_rerank_score_and_the_stages_time(reranked_page: Page) -> None:
    search(reranked_page, "painted lake sunrise")

    first = reranked_page.locator("#fused-list li.hit").first
    expect(first.locator(".rerank-score")).to_have_text(
        re.compile(r"^rerank score -?\d+\.\d{4} \(what ordered the hits\)$")
    )
    expect(reranked_page.locator("#fused-caption")).to_contain_text("reranked")
    expect(reranked_page.locator("#timings-body .timing")).to_have_count(7)
    expect(reranked_page.locator("#timings-body .timing[data-stage='rerank'] .ms")).to_have_text(re.compile(r" ms$"))


def test_an_answer_no_reranker_ordered_shows_no_rerank_score_nor_stage(page: Page) -> None:
    search(page, "painted lake sunrise")

    expect(page.locator("#fused-list li.hit").first).to_be_visible()
    expect(page.locator("#fused-list .rerank-score")).to_have_count(0)
    expect(page.locator("#timings-body .timing[data-stage='rerank']")).to_have_count(0)
    expect(page.locator("#fused-caption")).not_to_contain_text("reranked")


def test_a_long_document_id_keeps_the_document_view_and_its_close_button_on_the_page(
    page: Page, console_url: str
) -> None:
    project = "console-long-id"
    document = {"id": "long/" + "b" * 250, "title": "t" * 1000, "text": "A note with a very long id."}
    response = httpx.post(f"{console_url}/v1/projects/{project}/documents", json=document, timeout=60)
    assert response.status_code == 201, response.text
    page.fill("#project", project)
    page.click("#browse-button")

    page.locator("#documents-list a.doc").click()

    expect(page.locator("#document-caption")).to_have_text(f"{project} / {document['id']}")
    # The caption's one long word once widened the page to 2,200 px and pushed Close off the screen.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    close = page.locator("#document-close").bounding_box()
    assert close is not None
    assert close["x"] + close["width"] <= page.viewport_size["width"]

    # Deleted since: the 404's detail quotes the id, and the error box once widened the page as the caption did.
    assert (
        httpx.delete(f"{console_url}/v1/projects/{project}/documents/{document['id']}", timeout=30).status_code == 204
    )
    page.locator("#documents-list a.doc").click()
    expect(page.locator("#error .detail")).to_contain_text(document["id"])
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


NONE = "\N{EN DASH}"  # what a cell without a value shows

# A conversation: turns `<sequence>:<n>` of one session (one event time), so a when-question's hits gain the
# `date` and `neighbours` contributions on top of the two legs'.
CONVERSATION = [
    {"id": f"conv-1:D1:{number}", "title": speaker, "text": f"{speaker}: {text}", "event_time": "2023-05-08T13:56:00Z"}
    for number, (speaker, text) in enumerate(
        [
            ("Caroline", "What have you been painting lately?"),
            ("Melanie", "I painted the lake at sunrise last weekend."),
            ("Caroline", "That sounds lovely! When did you start?"),
            ("Melanie", "I started painting in May 2022, after my trip."),
        ],
        start=1,
    )
]


def test_the_breakdown_lists_each_boost_so_its_rows_add_up_to_the_fused_score(page: Page, console_url: str) -> None:
    project = "console-boosts"
    response = httpx.post(
        f"{console_url}/v1/projects/{project}/documents", json={"documents": CONVERSATION}, timeout=60
    )
    assert response.status_code == 201, response.text
    with page.expect_response("**/v1/search") as answered:
        search(page, "When did Melanie start painting?", project=project)
    hit = answered.value.json()["results"][0]
    fusion = hit["score_breakdown"]["fusion"]
    assert fusion["boosts"], "the when-question's top hit carries no boost: the test shows nothing"

    first = page.locator("#fused-list li.hit").first
    expect(first).to_have_attribute("data-id", hit["id"])

    # The fused score is the legs' contributions plus the boosts: each boost has its row, as in the API's JSON.
    rows = first.locator(".breakdown tr.boost")
    expect(rows).to_have_count(len(fusion["boosts"]))
    for row, (name, value) in zip(rows.all(), sorted(fusion["boosts"].items()), strict=True):
        expect(row).to_have_text(re.compile(rf"^{name} boost\s+{NONE}\s+{NONE}\s+{value:.4f}$"), use_inner_text=True)
    expect(first.locator(".fused-score")).to_have_text(f"fused score {fusion['score']:.4f} (zscore)")


def test_an_error_names_its_request_id_and_says_when_to_retry(page: Page) -> None:
    with page.expect_response("**/v1/search") as answered:
        search(page, "anything", project="not a project!")
    request_id = answered.value.headers["x-request-id"]

    # What the service's log files this request under: a 5xx's detail sends the reader there.
    expect(page.locator("#error .request-id")).to_have_text(f"Request id: {request_id}")
    expect(page.locator("#error .retry-after")).to_have_count(0)

    problem = '{"title": "Too many requests", "status": 429, "detail": "over this caller\'s rate"}'
    page.route(
        "**/v1/search",
        lambda route: route.fulfill(
            status=429, content_type="application/problem+json", headers={"retry-after": "7"}, body=problem
        ),
    )
    page.click("#search-button")

    expect(page.locator("#error strong")).to_have_text("Too many requests (429)")
    expect(page.locator("#error .retry-after")).to_have_text("Retry after 7 s.")


def test_a_proxys_error_page_is_named_not_quoted_as_markup(page: Page) -> None:
    gateway_page = "<html><body><h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>"
    page.route("**/v1/search", lambda route: route.fulfill(status=502, content_type="text/html", body=gateway_page))

    search(page, "pottery bowl")

    error = page.locator("#error")
    expect(error.locator("strong")).to_have_text("Bad Gateway (502)")  # was "HTTP 502 (502)"
    expect(error.locator(".detail")).to_have_text(
        "The answer to POST /v1/search is not the service's (text/html): a proxy or gateway between this page "
        "and the service answered it."
    )
    expect(error).not_to_contain_text("<h1>")


def test_a_refused_token_says_where_to_paste_one(page: Page) -> None:
    problem = '{"title": "Unauthorized", "status": 401, "detail": "a bearer token is required"}'
    page.route(
        "**/v1/search",
        lambda route: route.fulfill(status=401, content_type="application/problem+json", body=problem),
    )

    search(page, "pottery bowl")

    expect(page.locator("#error .detail")).to_have_text("a bearer token is required")
    expect(page.locator("#error .hint")).to_have_text(
        "This service wants a bearer token (AUTH_MODE=jwt): paste a valid one into “Bearer token” at the top."
    )


def test_a_search_the_service_never_answers_ends_in_an_error_not_a_spinner(page: Page) -> None:
    held = []
    page.route("**/v1/search", lambda route: held.append(route))  # noqa: PLW0108 - Playwright wraps functions only
    page.clock.install()  # the page's own timers, moved on by the test: no waiting
    search(page, "pottery bowl")
    expect(page.locator("#status")).to_have_text("Searching…")

    page.clock.run_for("01:01")

    expect(page.locator("#error strong")).to_have_text("No answer")
    expect(page.locator("#error .detail")).to_have_text(
        "The service did not answer POST /v1/search within 60 s: it may be stuck or overloaded. Try again."
    )
    expect(page.locator("#status")).to_have_text("The last request failed.")
    expect(page.locator("#search-button")).to_be_enabled()
    assert len(held) == 1


# WCAG 2's contrast ratio of an element's text against the first opaque background at or above it.
CONTRAST = """(element) => {
    const channels = (color) => color.match(/[\\d.]+/g).map(Number);
    const luminance = (color) => {
        const [r, g, b] = channels(color).slice(0, 3).map((value) => {
            const v = value / 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    let background = "rgb(255, 255, 255)";
    for (let node = element; node; node = node.parentElement) {
        const color = getComputedStyle(node).backgroundColor;
        if (channels(color)[3] !== 0) { background = color; break; }
    }
    const [light, dark] = [luminance(getComputedStyle(element).color), luminance(background)].sort().reverse();
    return (light + 0.05) / (dark + 0.05);
}"""
AA_CONTRAST = 4.5  # WCAG 2 AA for text under 18.66 px bold: badges are 11 px, scores 12 px


@pytest.mark.parametrize(
    ("strategy", "badge"), [("hybrid", "Hybrid"), ("semantic", "Semantic"), ("lexical", "Lexical")]
)
def test_each_hits_engine_badge_is_readable(page: Page, strategy: str, badge: str) -> None:
    search(page, "painted lake sunrise", strategy=strategy)

    shown = page.locator(f"#fused-list .badge.{badge}").first
    expect(shown).to_have_text(badge)

    # White on the legs' bar colours read 3.6:1 (Hybrid's green) and 2.9:1 (Lexical's orange).
    assert shown.evaluate(CONTRAST) >= AA_CONTRAST


def test_the_rerank_score_is_readable(reranked_page: Page) -> None:
    search(reranked_page, "painted lake sunrise")

    score = reranked_page.locator("#fused-list .rerank-score").first
    expect(score).to_be_visible()

    assert score.evaluate(CONTRAST) >= AA_CONTRAST  # green on white read 3.6:1
