// Rendering: builds DOM nodes with textContent only (document text is data, never markup).
// Ids, titles, sources and the query the status line echoes are data too, in any script: each sits in a
// <bdi>, so a right-to-left name (or a stray RIGHT-TO-LEFT OVERRIDE in one) is laid out on its own and
// never reorders the text around it.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const byId = (id) => document.getElementById(id);

/** A score or a duration to `digits` places (1.0 reads 1.0000 beside 0.6948); "–" when there is none. */
export function fmt(value, digits = 4) {
  if (value === null || value === undefined) return "–";
  return Number(value).toFixed(digits);
}

/** A 1-based rank, or "–" for a leg that missed the hit. */
function rankText(rank) {
  return rank === null || rank === undefined ? "–" : String(rank);
}

/** A plural that reads right: "1 hit", "2 hits". */
export function count(number, noun) {
  return `${number} ${noun}${number === 1 ? "" : "s"}`;
}

export function showError(error) {
  const box = byId("error");
  const lines = [
    el("strong", { text: `${error.title ?? "Error"}${error.status ? ` (${error.status})` : ""}` }),
    el("div", { class: "detail", text: error.detail ?? error.message }),
  ];
  if (error.field) lines.push(el("div", { text: `Field: ${error.field}` }));
  if (error.reasons?.length) lines.push(el("div", { text: `Reasons: ${error.reasons.join(", ")}` }));
  if (error.status === 401) {
    lines.push(el("div", { class: "hint",
      text: "This service wants a bearer token (AUTH_MODE=jwt): paste a valid one into “Bearer token” at the top." }));
  }
  if (error.retryAfter) {
    const seconds = /^\d+$/.test(error.retryAfter) ? `${error.retryAfter} s` : error.retryAfter;  // or an HTTP date
    lines.push(el("div", { class: "retry-after", text: `Retry after ${seconds}.` }));
  }
  if (error.requestId) lines.push(el("div", { class: "request-id", text: `Request id: ${error.requestId}` }));
  box.replaceChildren(...lines);
  box.hidden = false;
}

export function hideAnswer() {
  for (const id of ["overview", "fused", "legs", "degraded"]) byId(id).hidden = true;
}

export function clearError() {
  byId("error").hidden = true;
  byId("error").replaceChildren();
}

function keyValues(pairs) {
  return el("dl", { class: "kv" }, pairs.filter(([, value]) => value !== null && value !== "").flatMap(([key, value]) => [
    el("dt", { text: key }),
    el("dd", {}, value),
  ]));
}

function meter(fraction) {
  const fill = el("span");
  fill.style.width = `${Math.round(Math.max(0, Math.min(1, fraction)) * 100)}%`;
  return el("span", { class: "meter" }, fill);
}

function renderDecision(answer) {
  const analysis = answer.query_analysis ?? {};
  const entities = Object.entries(analysis.entities ?? {})
    .filter(([, value]) => (Array.isArray(value) ? value.length : Object.keys(value ?? {}).length))
    .map(([name, value]) => `${name}: ${Array.isArray(value) ? value.join(", ") : JSON.stringify(value)}`);
  const flags = ["has_special_syntax", "has_date_filters", "has_negation"].filter((flag) => analysis[flag]);
  byId("decision-body").replaceChildren(keyValues([
    ["Strategy run", el("strong", { id: "strategy-run", text: answer.search_strategy })],
    // The optimizer's own confidence in its pick; the answer's strategy_confidence is 1 whenever the
    // request or the service fixed the strategy, so it is shown as what it is.
    ["Optimizer's pick", analysis.routed_strategy ?? null],
    ["Optimizer's confidence", analysis.confidence === undefined ? null
      : el("span", {}, meter(analysis.confidence), Number(analysis.confidence).toFixed(2))],
    ["Strategy confidence", Number(answer.strategy_confidence).toFixed(2)],
    ["Question type", answer.question_type],
    ["Fusion", answer.fusion_method],
    ["Tokens", (analysis.tokens ?? []).join(" ")],
    ["Entities", entities.length ? entities.join("; ") : null],
    ["Signals", flags.length ? flags.map((flag) => flag.replace("has_", "").replace("_", " ")).join(", ") : null],
    ["Rollout arm", `${answer.rollout_arm} (${answer.rollout_decided_by})`],
    ["Cached", answer.cached ? "yes" : "no"],
  ]));
}

const STAGES = [
  ["optimize", "optimize_time_ms"],
  ["embed", "embed_time_ms"],
  ["semantic", "semantic_time_ms"],
  ["lexical", "lexical_time_ms"],
  ["fusion", "fusion_time_ms"],
  ["rerank", "rerank_time_ms"],  // shown only for a reranked answer (see `reranked`)
  ["total", "total_time_ms"],
];

const hasValue = (value) => value !== null && value !== undefined;

/** Whether a second stage (`RERANKER`) ordered this answer: its hits carry `rerank_score`. */
function reranked(answer) {
  // rerank_time_ms alone cannot tell: it is 0 when no reranker ran, and also on a cached reranked answer.
  return answer.results.some((hit) => hasValue(hit.rerank_score)) || answer.metrics.rerank_time_ms > 0;
}

function renderTimings(metrics, { withRerank }) {
  const total = Math.max(metrics.total_time_ms, 0.001);
  const stages = STAGES.filter(([name]) => name !== "rerank" || withRerank);
  byId("timings-body").replaceChildren(
    ...stages.map(([name, key]) => {
      const fill = el("div", { class: `fill ${name}` });
      fill.style.width = `${Math.min(100, (metrics[key] / total) * 100).toFixed(1)}%`;
      return el("div", { class: "timing", "data-stage": name },
        el("span", { text: name }), el("div", { class: "track" }, fill), el("span", { class: "ms", text: `${fmt(metrics[key], 1)} ms` }));
    }),
    el("p", { class: "muted", text: `Legs run concurrently in hybrid search; embed time is part of the semantic leg. `
      + `${metrics.semantic_results_count} semantic and ${metrics.lexical_results_count} lexical candidates, `
      + `${metrics.final_results_count} returned.` }),
  );
}

/** `text` isolated from its neighbours in the line (see the top of this file). */
export function isolated(text) {
  return el("bdi", { text });
}

/** A link opening `hit`'s document; `openDocument(documentId, chunkId, link)` gets the link, to return focus to. */
function documentLink(hit, openDocument) {
  return el("a", { class: "doc", href: "#", "data-document": hit.document_id,
    onclick: (event) => { event.preventDefault(); openDocument(hit.document_id, hit.id, event.currentTarget); } },
    isolated(hit.document_id));
}

function breakdown(hit) {
  const parts = hit.score_breakdown;
  const contributions = parts.fusion ?? parts.rrf_components;
  // z-score contributions can be negative: the bar shows how the positive part splits between the legs.
  const positive = (leg) => Math.max(0, contributions[`${leg}_contribution`]);
  const sum = positive("semantic") + positive("lexical");
  const split = el("div", { class: "split", title: "positive contributions to the final score, by leg" });
  for (const leg of ["semantic", "lexical"]) {
    const share = el("span", { class: leg });
    share.style.width = sum > 0 ? `${(positive(leg) / sum) * 100}%` : "0";
    split.append(share);
  }
  return el("div", { class: "breakdown" },
    // final_score is the readable relevance in [0, 1]; the fused score (what ordered the hits, unless a
    // reranker did) is the contributions' sum, on the fusion's own scale.
    el("div", { class: "final", title: "final_score: a relevance in [0, 1], what min_score thresholds",
      text: `relevance ${fmt(hit.final_score)}` }),
    hasValue(hit.rerank_score) ? el("div", { class: "rerank-score", title: "rerank_score: the second stage's score",
      text: `rerank score ${fmt(hit.rerank_score)} (what ordered the hits)` }) : null,
    el("div", { class: "fused-score", text: `fused score ${fmt(contributions.score ?? null)}${parts.fusion ? ` (${parts.fusion.method})` : ""}` }),
    el("table", {},
      el("tr", {}, el("th", { text: "leg" }), el("th", { text: "rank" }), el("th", { text: "raw score" }), el("th", { text: "contribution" })),
      el("tr", { class: "semantic" }, el("td", { text: "semantic" }), el("td", { text: rankText(parts.semantic_rank) }),
        el("td", { text: fmt(hit.semantic_score) }), el("td", { text: fmt(contributions.semantic_contribution) })),
      el("tr", { class: "lexical" }, el("td", { text: "lexical" }), el("td", { text: rankText(parts.lexical_rank) }),
        el("td", { text: fmt(hit.lexical_score) }), el("td", { text: fmt(contributions.lexical_contribution) })),
      // What the score holds besides the legs (entity, date, neighbours, ...): without these rows a
      // when-question's hit read 0.57 + 0.96 = a fused score of 3.87.
      Object.entries(parts.fusion?.boosts ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) =>
        el("tr", { class: "boost", "data-boost": name }, el("td", { text: `${name} boost` }), el("td", { text: "–" }),
          el("td", { text: "–" }), el("td", { text: fmt(value) }))),
    ),
    split,
  );
}

function renderFused(answer, openDocument) {
  byId("fused-caption").textContent = `${count(answer.results.length, "hit")} · ${answer.search_strategy} · fusion ${answer.fusion_method}`
    + `${reranked(answer) ? " · reranked" : ""}`;
  byId("fused-list").replaceChildren(...answer.results.map((hit) => el("li", { class: "hit", "data-id": hit.id },
    el("div", { class: "rank", text: hit.rank }),
    el("div", {},
      el("div", { class: "title" }, isolated(hit.breadcrumb.join(" › ") || hit.section_title || hit.id),
        el("span", { class: `badge ${hit.retrieval_engine}`, text: hit.retrieval_engine })),
      el("div", { class: "text", text: hit.text }),
      el("div", { class: "source" }, "document ", documentLink(hit, openDocument), hit.source ? [" · ", isolated(hit.source)] : "",
        hit.tags.length ? [" · tags ", isolated(hit.tags.join(", "))] : ""),
    ),
    breakdown(hit),
  )));
  if (!answer.results.length) byId("fused-list").replaceChildren(el("li", { class: "muted", text: "No hits." }));
}

function renderLeg(leg, hits, otherHits, fusedIds, openDocument) {
  const list = byId(`leg-${leg}`).querySelector(".leg-list");
  if (hits === null || hits === undefined) {
    list.replaceChildren(el("li", { class: "empty", text: "This leg did not run (strategy or failure)." }));
    return;
  }
  if (!hits.length) {
    list.replaceChildren(el("li", { class: "empty", text: "This leg found nothing." }));
    return;
  }
  const otherRank = new Map((otherHits ?? []).map((hit) => [hit.id, hit.rank]));
  list.replaceChildren(...hits.map((hit) => {
    const elsewhere = otherRank.get(hit.id);
    const only = otherHits && elsewhere === undefined;
    return el("li", { class: [only ? "only" : "", fusedIds.has(hit.id) ? "fused" : ""].join(" ").trim(), "data-id": hit.id,
      title: only ? "only this leg found it" : "" },
      el("span", { text: `#${hit.rank}` }),
      el("span", {}, documentLink(hit, openDocument), hit.section_title ? [" · ", isolated(hit.section_title)] : "",
        el("span", { class: "other", text: only ? " · only here" : elsewhere ? ` · other leg #${elsewhere}` : "" })),
      el("span", { class: "score", text: fmt(hit.score) }),
    );
  }));
}

function renderLegs(answer, openDocument) {
  const rankings = answer.leg_rankings ?? { semantic: null, lexical: null };
  const fusedIds = new Set(answer.results.map((hit) => hit.id));
  renderLeg("semantic", rankings.semantic, rankings.lexical, fusedIds, openDocument);
  renderLeg("lexical", rankings.lexical, rankings.semantic, fusedIds, openDocument);
  const semantic = new Set((rankings.semantic ?? []).map((hit) => hit.id));
  const lexical = new Set((rankings.lexical ?? []).map((hit) => hit.id));
  const both = [...semantic].filter((id) => lexical.has(id)).length;
  const bothRan = Array.isArray(rankings.semantic) && Array.isArray(rankings.lexical);
  byId("legs-caption").textContent = `found by both: ${both} · only semantic: ${semantic.size - both} · only lexical: `
    + `${lexical.size - both} · bold: in the fused page${bothRan ? " · shaded: the other leg missed it" : ""}`;
}

export function renderAnswer(answer, openDocument) {
  const degraded = byId("degraded");
  degraded.hidden = !answer.degraded;
  degraded.textContent = answer.degraded
    ? `Degraded answer: ${answer.degraded_reasons.join(", ")} — the other leg answered alone.` : "";
  renderDecision(answer);
  renderTimings(answer.metrics, { withRerank: reranked(answer) });
  renderFused(answer, openDocument);
  renderLegs(answer, openDocument);
  for (const id of ["overview", "fused", "legs"]) byId(id).hidden = false;
}

/** A document's metadata as indented JSON (shown as text, whatever it holds); null when it has none. */
function metadataText(metadata) {
  return metadata && Object.keys(metadata).length ? JSON.stringify(metadata, null, 2) : null;
}

export function renderDocument(document_, highlightChunk) {
  byId("document-caption").replaceChildren(`${document_.project} / `, isolated(document_.id));
  byId("document-meta").replaceChildren(...[
    ["Title", document_.title], ["Source", document_.source], ["Tags", document_.tags.join(", ")],
    ["Event time", document_.event_time], ["Context", document_.context], ["Metadata", metadataText(document_.metadata)],
    ["Version", document_.version], ["Lexically indexed", document_.lexically_indexed ? "yes" : "not yet"],
    ["Updated", document_.updated_at], ["Chunks", document_.chunks.length],
  ].filter(([, value]) => value !== null && value !== "").flatMap(([key, value]) => [
    el("dt", { text: key }), el("dd", { class: key === "Metadata" ? "metadata" : null, text: value })]));
  byId("document-chunks").replaceChildren(...document_.chunks.map((chunk) => el("li",
    { class: chunk.id === highlightChunk ? "hit-chunk" : "", "data-id": chunk.id },
    el("div", { class: "crumb" }, isolated(chunk.id), " · ", isolated(chunk.breadcrumb.join(" › ")), ` · ${chunk.level}`),
    el("div", { class: "text", text: chunk.text }))));
  byId("document").hidden = false;
}

export function renderDocumentList(page, append, openDocument) {
  const list = byId("documents-list");
  const items = page.items.map((item) => el("li", {},
    documentLink({ document_id: item.id, id: null }, openDocument), " ", item.title ? ["· ", isolated(item.title)] : "",
    ` (${item.chunks} ${item.chunks === 1 ? "chunk" : "chunks"})`));
  if (append) list.append(...items);
  else list.replaceChildren(...items);
  const shown = list.querySelectorAll("li:not(.muted)").length;
  if (!shown) list.replaceChildren(el("li", { class: "muted", text: "No documents in this project." }));
  byId("documents-caption").textContent = `${shown} shown`;
  byId("documents-more").hidden = !page.next_cursor;
  byId("documents").hidden = false;
}
