// The console's wiring: form -> POST /v1/search (explain) -> render; document view and listing.
import {
  ApiError, getDocument, listDocuments, projectStats, search, searchBody, storedToken, storeToken, usableFusionBoxes,
} from "./api.js";
import {
  clearError, count, hideAnswer, isolated, renderAnswer, renderDocument, renderDocumentList, showError,
} from "./render.js";

const byId = (id) => document.getElementById(id);
const PROJECT_KEY = "poimen.console.project";
let documentsCursor = null;
let documentsProject = null;  // the project the listed documents (and "More") belong to

// The search form's boxes, by id; a search's URL carries the non-empty ones (`?project=demo&query=...`),
// so a link or a bookmark reopens it and Back returns to the search before. Never the token.
const SEARCH_FIELDS = [
  "project", "query", "strategy", "fusion", "weight-semantic", "weight-lexical", "rrf-k", "limit",
  "source-prefix", "tags", "level", "date-from", "date-to",
];

function searchAddress() {
  const parameters = new URLSearchParams();
  for (const id of SEARCH_FIELDS) {
    const value = byId(id).value;
    if (value !== "") parameters.set(id, value);
  }
  return `${location.pathname}?${parameters}`;
}

/** Fill the search form from `?...` (boxes it does not name are emptied); whether it names a query. */
function fillFromAddress(search) {
  const parameters = new URLSearchParams(search);
  if (!parameters.get("query")) return false;
  for (const id of SEARCH_FIELDS) {
    const input = byId(id);
    const value = parameters.get(id) ?? (id === "project" ? input.value : "");
    // A select keeps its first option for a value it does not offer, as a hand-edited link may hold.
    if (input.tagName === "SELECT" && ![...input.options].some((option) => option.value === value)) {
      input.selectedIndex = 0;
    } else {
      input.value = value;
    }
  }
  syncFusionBoxes();
  return true;
}

/** Grey out the fusion boxes the chosen strategy (and fusion) cannot use: they are not sent. */
function syncFusionBoxes() {
  const usable = usableFusionBoxes(byId("strategy").value, byId("fusion").value);
  byId("fusion").disabled = !usable.fusion;
  byId("weight-semantic").disabled = !usable.weights;
  byId("weight-lexical").disabled = !usable.weights;
  byId("rrf-k").disabled = !usable.rrfK;
}

function formValues() {
  return {
    project: byId("project").value, query: byId("query").value, strategy: byId("strategy").value,
    fusion: byId("fusion").value, weightSemantic: byId("weight-semantic").value, weightLexical: byId("weight-lexical").value,
    rrfK: byId("rrf-k").value, limit: byId("limit").value, sourcePrefix: byId("source-prefix").value,
    tags: byId("tags").value, level: byId("level").value, dateFrom: byId("date-from").value, dateTo: byId("date-to").value,
  };
}

/** The status line: strings, and nodes such as the user's text `isolated` (a query in any script). */
function setStatus(...parts) {
  byId("status").replaceChildren(...parts);
}

const inFlight = new Map();  // button -> how many of its requests are still running
let latestSearch = 0;  // the number of the search started last: only its answer (or error) is shown

async function busy(button, work) {
  inFlight.set(button, (inFlight.get(button) ?? 0) + 1);
  button.disabled = true;
  clearError();
  try {
    await work();
  } catch (error) {
    setStatus("The last request failed.");
    showError(error);
  } finally {
    const left = inFlight.get(button) - 1;
    inFlight.set(button, left);
    button.disabled = left > 0;  // enabled again when the last of them ends, not the first
  }
}

const DAYS = "a day from 0001-01-01 to 9999-12-31 (a year of four digits)";  // the days the service can store

/** The first box of the form the page cannot send, and why; null when every box can be sent. */
function unsendableInput() {
  // A number box holding what is not a number ("1e"): the browser gives its value as "".
  const number = [...document.querySelectorAll("#search-form input[type=number]:not(:disabled)")].find((input) => input.validity.badInput);
  if (number) return [number, "not a number"];
  // The date box's year takes six digits: a From of year 20245 went out and came back a 400, a To threw
  // from the day-after computation. Its min and max are the service's first and last days.
  const day = [...document.querySelectorAll("#search-form input[type=date]")]
    .find((input) => input.validity.badInput || input.validity.rangeUnderflow || input.validity.rangeOverflow);
  return day ? [day, DAYS] : null;
}

function inputError(input, detail) {
  const label = input.closest("label")?.firstChild?.textContent.trim() ?? input.id;
  input.focus();
  return new ApiError(0, "Invalid input", `${label}: ${detail}`, { field: input.id });
}

/** The Project box without the blanks around it, written back: the box, the address and the request agree. */
function trimmedProject() {
  const input = byId("project");
  input.value = input.value.trim();
  return input.value;
}

function checkedProject() {
  const project = trimmedProject();  // before the pattern check: a pasted " demo" is the project demo
  const input = byId("project");
  if (!input.checkValidity()) throw inputError(input, "1-64 letters, digits, '.', '_' or '-', and not '.' or '..'");
  return project;
}

let latestDocument = 0;  // the number of the document asked for last (or closed, or searched past)
let documentsLoading = 0;  // how many document requests are still running
let documentOpener = null;  // the link that opened the document view: Close gives it the focus back

/** Whatever document answer is still on its way must not open: a later click, Close or a search owns the view. */
function forgetPendingDocument() {
  latestDocument += 1;
}

// The project is the answer's or the listing's, not whatever the Project box says by the time of the click.
async function openDocument(project, documentId, chunkId, opener) {
  const mine = ++latestDocument;
  const view = byId("document");
  documentsLoading += 1;
  view.setAttribute("aria-busy", "true");
  clearError();
  try {
    const document_ = await getDocument(project, documentId);
    // A slow answer for a document clicked earlier would replace the one clicked since.
    if (mine !== latestDocument) return;
    renderDocument(document_, chunkId);
    documentOpener = opener;
    // The focus follows the view (a keyboard user's Tab went on far above it), unless it went elsewhere
    // while the document was on its way (the user typing a query is not interrupted).
    if ([opener, document.body, null].includes(document.activeElement)) {
      byId("document-heading").focus({ preventScroll: true });  // the scroll below shows the hit's chunk
    }
    const target = byId("document-chunks").querySelector("li.hit-chunk") ?? view;
    target.scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (error) {
    if (mine === latestDocument) showError(error);
  } finally {
    documentsLoading -= 1;
    if (!documentsLoading) view.removeAttribute("aria-busy");
  }
}

const TITLE = document.title;
const TITLE_QUERY_CHARS = 60;  // a tab or a history menu shows little more
const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/** The page's title for a search of `query`: each history entry names its own (Back, the history menu). */
function searchTitle(query) {
  const oneLine = query.replace(/\s+/g, " ").trim();
  // Counted and cut in characters as they are seen: a UTF-16 cut split an emoji into a lone surrogate, or kept a
  // Thai letter without its tone mark.
  const characters = Array.from(GRAPHEMES.segment(oneLine), (part) => part.segment);
  const shown = characters.length > TITLE_QUERY_CHARS
    ? `${characters.slice(0, TITLE_QUERY_CHARS - 1).join("").trimEnd()}…`
    : oneLine;
  // Isolated (FSI ... PDI), as the status line's <bdi>: a right-to-left override in it would reorder the rest.
  return `“\u2068${shown}\u2069” – ${TITLE}`;
}

async function runSearch(event, { remember = true } = {}) {
  event?.preventDefault();
  trimmedProject();
  const values = formValues();
  sessionStorage.setItem(PROJECT_KEY, values.project);
  const address = searchAddress();
  // Back and Forward replay an address already in the history: only a new search adds one.
  if (remember && address !== `${location.pathname}${location.search}`) history.pushState(null, "", address);
  document.title = searchTitle(values.query);  // after pushState: the new entry gets it
  const mine = ++latestSearch;
  // A search started after this one (Enter again, Back, Forward) owns the page: this one's answer, however
  // late it arrives, must not replace that one's (the address would say one query and the hits another's).
  const superseded = () => mine !== latestSearch;
  await busy(byId("search-button"), async () => {
    setStatus("Searching…");
    byId("document").hidden = true;  // the last search's document is not this one's
    forgetPendingDocument();
    const started = performance.now();
    let answer;
    try {
      const unsendable = unsendableInput();
      if (unsendable) throw inputError(...unsendable);
      answer = await search(searchBody(values));
    } catch (error) {
      if (superseded()) return;
      hideAnswer();  // never leave the last query's answer under this query's error
      throw error;
    }
    if (superseded()) return;
    renderAnswer(answer, (documentId, chunkId, link) => openDocument(answer.project, documentId, chunkId, link));
    const roundTrip = `${(performance.now() - started).toFixed(0)} ms round trip`;
    // The query in its own <bdi>: a right-to-left one (or a RIGHT-TO-LEFT OVERRIDE in it) reordered the line.
    setStatus("“", isolated(answer.query),
      `” in ${answer.project}: ${count(answer.results.length, "hit")}, ${roundTrip}.`);
    if (!answer.results.length && (await projectStats(answer.project)).documents === 0 && !superseded()) {
      // Nothing found because there is nothing to find: a misspelt project reads like an unlucky query.
      setStatus("“", isolated(answer.query),
        `” in ${answer.project}: no hits, ${roundTrip}; project ${answer.project} holds no documents.`);
    }
  });
}

let latestListing = 0;  // the number of the listing request (Browse or More) started last: only its answer is shown

async function browse(append) {
  const mine = ++latestListing;
  // A "More" still on its way when Browse lists another project would append that project's page to this
  // listing (and leave "More" on its cursor); a slow Browse would replace a listing asked for since.
  const superseded = () => mine !== latestListing;
  await busy(byId(append ? "documents-more" : "browse-button"), async () => {
    // "More" goes on with the project listed, whatever the Project box says now.
    const project = append ? documentsProject : checkedProject();
    let page;
    try {
      page = await listDocuments(project, append ? documentsCursor : null);
    } catch (error) {
      if (superseded()) return;
      throw error;
    }
    if (superseded()) return;
    documentsCursor = page.next_cursor;
    documentsProject = project;
    renderDocumentList(page, append, (documentId, _, link) => openDocument(project, documentId, null, link));
    // The status line speaks of the last request: never a failure that browsing has just followed.
    setStatus(`${count(page.items.length, append ? "more document" : "document")} of ${project} listed.`);
  });
}

function start() {
  const token = byId("token");
  token.value = storedToken();
  token.addEventListener("input", () => storeToken(token.value.trim()));
  byId("forget-token").addEventListener("click", () => {
    token.value = "";
    storeToken("");
  });
  byId("project").value = sessionStorage.getItem(PROJECT_KEY) || byId("project").value;
  byId("search-form").addEventListener("submit", (event) => runSearch(event));
  byId("strategy").addEventListener("change", syncFusionBoxes);
  byId("fusion").addEventListener("change", syncFusionBoxes);
  window.addEventListener("popstate", () => {
    if (fillFromAddress(location.search)) {
      runSearch(null, { remember: false });
    } else {  // back to the page before any search
      document.title = TITLE;
      byId("query").value = "";
      hideAnswer();
      clearError();
      byId("document").hidden = true;
      setStatus("Type a query and press Search.");
    }
  });
  // Enter in the query searches, as it does in the one-line boxes; Shift+Enter starts a new line.
  byId("query").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      byId("search-form").requestSubmit();
    }
  });
  byId("browse-button").addEventListener("click", () => browse(false));
  byId("documents-more").addEventListener("click", () => browse(true));
  byId("document-close").addEventListener("click", () => {
    byId("document").hidden = true;
    forgetPendingDocument();  // a document still on its way does not reopen what was just closed
    // Back to the link that opened it, or the query when a search or a listing has replaced that link.
    const opener = documentOpener?.getClientRects().length ? documentOpener : byId("query");
    documentOpener = null;
    opener.focus();
  });
  document.body.dataset.ready = "true";
  if (fillFromAddress(location.search)) runSearch(null, { remember: false });  // a link to a search
}

start();
