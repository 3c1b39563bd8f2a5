// The console's wiring: form -> POST /v1/search (explain) -> render; document view and listing.
import { getDocument, listDocuments, search, searchBody, storedToken, storeToken } from "./api.js";
import { clearError, hideAnswer, renderAnswer, renderDocument, renderDocumentList, showError } from "./render.js";

const byId = (id) => document.getElementById(id);
const PROJECT_KEY = "poimen.console.project";
let documentsCursor = null;

function formValues() {
  return {
    project: byId("project").value, query: byId("query").value, strategy: byId("strategy").value,
    fusion: byId("fusion").value, weightSemantic: byId("weight-semantic").value, weightLexical: byId("weight-lexical").value,
    rrfK: byId("rrf-k").value, limit: byId("limit").value, sourcePrefix: byId("source-prefix").value,
    tags: byId("tags").value, level: byId("level").value, dateFrom: byId("date-from").value, dateTo: byId("date-to").value,
  };
}

function setStatus(text) {
  byId("status").textContent = text;
}

async function busy(button, work) {
  button.disabled = true;
  clearError();
  try {
    await work();
  } catch (error) {
    setStatus("The last request failed.");
    showError(error);
  } finally {
    button.disabled = false;
  }
}

async function openDocument(documentId, chunkId) {
  const project = byId("project").value.trim();
  clearError();
  try {
    renderDocument(await getDocument(project, documentId), chunkId);
    byId("document").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (error) {
    showError(error);
  }
}

async function runSearch(event) {
  event.preventDefault();
  const values = formValues();
  sessionStorage.setItem(PROJECT_KEY, values.project);
  await busy(byId("search-button"), async () => {
    setStatus("Searching…");
    const started = performance.now();
    let answer;
    try {
      answer = await search(searchBody(values));
    } catch (error) {
      hideAnswer();  // never leave the last query's answer under this query's error
      throw error;
    }
    renderAnswer(answer, openDocument);
    setStatus(`“${answer.query}” in ${answer.project}: ${answer.results.length} hits, `
      + `${(performance.now() - started).toFixed(0)} ms round trip.`);
  });
}

async function browse(append) {
  await busy(byId(append ? "documents-more" : "browse-button"), async () => {
    const project = byId("project").value.trim();
    const page = await listDocuments(project, append ? documentsCursor : null);
    documentsCursor = page.next_cursor;
    renderDocumentList(page, append, openDocument);
    // The status line speaks of the last request: never a failure that browsing has just followed.
    setStatus(`${page.items.length} ${append ? "more " : ""}documents of ${project} listed.`);
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
  byId("search-form").addEventListener("submit", runSearch);
  byId("browse-button").addEventListener("click", () => browse(false));
  byId("documents-more").addEventListener("click", () => browse(true));
  byId("document-close").addEventListener("click", () => {
    byId("document").hidden = true;
  });
  document.body.dataset.ready = "true";
}

start();
