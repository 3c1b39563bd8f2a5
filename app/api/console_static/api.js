// Calls to the service's own API. Every call carries the pasted token (if any); every failure becomes
// an ApiError whose message is readable: the problem+json `detail`, the offending field, engine reasons.

const TOKEN_KEY = "poimen.console.token";

export class ApiError extends Error {
  constructor(status, title, detail, extra = {}) {
    super(detail);
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.field = extra.field ?? null;
    this.reasons = extra.reasons ?? null;
    this.requestId = extra.requestId ?? null;  // what the service's log files the request under
    this.retryAfter = extra.retryAfter ?? null;  // a 429's, 503's or 504's Retry-After, as sent
  }
}

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function storeToken(token) {
  // Session storage at most: the token never outlives the tab and is never written to disk by us.
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** How long a request may go unanswered before the page gives up on it and says so. */
const ANSWER_TIMEOUT_S = 60;

// What a header value may hold (fetch refuses the rest): tab, visible ASCII, space and the rest of Latin-1.
const SENDABLE_HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

async function call(method, path, body) {
  const headers = { accept: "application/json, application/problem+json" };
  const token = storedToken().trim();
  if (token) headers.authorization = token.toLowerCase().startsWith("bearer ") ? token : `Bearer ${token}`;
  if (headers.authorization && !SENDABLE_HEADER_VALUE.test(headers.authorization)) {
    // fetch would throw, which read as "Service unreachable"; the token is never quoted back (it is a secret).
    throw new ApiError(0, "Invalid token", "The token cannot be sent: it holds characters no HTTP header can carry "
      + "(a line break, or a letter beyond Latin-1). Paste the token again as it was issued.", { field: "token" });
  }
  if (body !== undefined) headers["content-type"] = "application/json";
  const where = `${method} ${path.split("?")[0]}`;
  // A stuck service (or proxy) never answers, and fetch has no time limit: the page said "Searching…" for good.
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ANSWER_TIMEOUT_S * 1000);
  let response;
  let text;
  try {
    response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: abort.signal,
    });
    text = await response.text();
  } catch (error) {
    if (abort.signal.aborted) {
      throw new ApiError(0, "No answer", `The service did not answer ${where} within ${ANSWER_TIMEOUT_S} s: `
        + "it may be stuck or overloaded. Try again.");
    }
    throw new ApiError(0, "Service unreachable", `The request did not reach the service (${error.message}).`);
  } finally {
    clearTimeout(timer);
  }
  let payload = null;
  try {
    payload = text ? JSON.parse(text) : null;
  } catch {
    payload = null;
  }
  const type = response.headers.get("content-type") || "no content type";
  if (!response.ok) {
    const problem = payload && typeof payload === "object" ? payload : {};
    // A page that is not JSON came from something in between (a proxy's "502 Bad Gateway"): its markup
    // read as the service's words.
    const foreign = payload === null && text && /html/i.test(type);
    const detail = foreign
      ? `The answer to ${where} is not the service's (${type.split(";")[0]}): a proxy or gateway between this page `
        + "and the service answered it."
      : problem.detail || text.slice(0, 300) || response.statusText || "no detail given";
    throw new ApiError(response.status, problem.title || response.statusText || "HTTP error", detail, {
      ...problem,
      requestId: response.headers.get("x-request-id"),
      retryAfter: response.headers.get("retry-after"),
    });
  }
  if (payload === null || typeof payload !== "object") {
    // Every route the console calls answers a JSON object: anything else came from something in between
    // (a proxy's or a login page), and reading fields off it would fail somewhere far from here.
    throw new ApiError(response.status, "Unreadable answer",
      `The answer to ${where} is not JSON (${type}): a proxy or a login page may stand `
      + "between this page and the service.");
  }
  return payload;
}

function splitTags(text) {
  return text.split(",").map((tag) => tag.trim()).filter(Boolean);
}

const LAST_DAY = "9999-12-31";  // the service's dates end with year 9999; the midnight after it has none

function dayAfter(day) {
  const next = new Date(`${day}T00:00:00Z`);
  next.setUTCDate(next.getUTCDate() + 1);
  return `${next.toISOString().slice(0, 10)}T00:00:00Z`;
}

function numberOrNull(text) {
  return text.trim() === "" ? null : Number(text);
}

/** Strategies that rank one leg's list and fuse nothing: the service refuses fusion options beside them. */
const FUSES_NOTHING = new Set(["semantic", "lexical", "cascading"]);

/** Which fusion boxes a search with this strategy and fusion can use (the others are not sent). */
export function usableFusionBoxes(strategy, fusion) {
  const fuses = !FUSES_NOTHING.has(strategy);
  // RRF's k only for RRF; with the service's default fusion the service says whether that is RRF.
  return { fusion: fuses, weights: fuses, rrfK: fuses && (fusion === "" || fusion === "rrf") };
}

/** The body of POST /v1/search from the form's values; unset fields are left to the service. */
export function searchBody(form) {
  const body = { project: form.project.trim(), query: form.query.trim(), explain: true };
  if (form.strategy) body.strategy = form.strategy;
  const usable = usableFusionBoxes(form.strategy, form.fusion);
  if (form.fusion && usable.fusion) body.fusion = form.fusion;
  const semantic = usable.weights ? numberOrNull(form.weightSemantic) : null;
  const lexical = usable.weights ? numberOrNull(form.weightLexical) : null;
  // Only what was typed: the service gives a leg left blank the complement of the other, or the default.
  if (semantic !== null || lexical !== null) {
    body.weights = {};
    if (semantic !== null) body.weights.semantic = semantic;
    if (lexical !== null) body.weights.lexical = lexical;
  }
  const rrfK = usable.rrfK ? numberOrNull(form.rrfK) : null;
  if (rrfK !== null) body.rrf_k = rrfK;
  const limit = numberOrNull(form.limit);
  if (limit !== null) body.limit = limit;
  const filters = {};
  if (form.sourcePrefix.trim()) filters.source_prefix = form.sourcePrefix.trim();
  const tags = splitTags(form.tags);
  if (tags.length) filters.tags = tags;
  if (form.level.trim()) filters.level = form.level.trim();
  if (form.dateFrom) filters.date_from = `${form.dateFrom}T00:00:00Z`;
  // "To" names the last day wanted (UTC); the service's end is exclusive: the next day's midnight.
  // The last day there is holds every time the service can store: it is no bound at all (its next
  // midnight would be "+010000-01-01", which the service refuses).
  if (form.dateTo && form.dateTo < LAST_DAY) filters.date_to = dayAfter(form.dateTo);
  if (Object.keys(filters).length) body.filters = filters;
  return body;
}

export function search(body) {
  return call("POST", "/v1/search", body);
}

const segment = (value) => encodeURIComponent(value);

export function getDocument(project, documentId) {
  return call("GET", `/v1/projects/${segment(project)}/documents/${documentId.split("/").map(segment).join("/")}`);
}

export function projectStats(project) {
  return call("GET", `/v1/projects/${segment(project)}`);
}

export function listDocuments(project, cursor) {
  const query = new URLSearchParams({ limit: "50" });
  if (cursor) query.set("cursor", cursor);
  return call("GET", `/v1/projects/${segment(project)}/documents?${query}`);
}
