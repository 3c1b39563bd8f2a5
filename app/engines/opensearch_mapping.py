"""The OpenSearch chunk index: its settings and mapping, and the versioned name it lives under.

The index lives under a versioned name (`<alias>-v<SCHEMA_VERSION>`) behind the configured alias, so a
mapping change is a new version, a reindex and an atomic alias swap (`app.engines.opensearch_lifecycle.ensure_index`),
never downtime.

Deviations from the reference mapping (`hybrid-search-design.md` §2.2), each on purpose:
- `source` and `breadcrumb` are English text with a `raw` keyword sub-field instead of bare keywords:
  the query's `multi_match` searches them as words, and filters use `source.raw`.
- The `ngram_tokenizer` sits under `analysis.tokenizer` (the reference nests it under `analyzer`,
  which OpenSearch rejects), and field boosts live in the query, not the mapping (mapping boosts are
  deprecated).
- Fields needed to rebuild a `Chunk` (`chunk_id`, `position`, `tags`, `event_time`, `chunk_hash`) are added.
- `tags` has an `english` text sub-field, `tags.text`, searched by the `multi_match` unboosted (half the
  content's weight, like breadcrumb and source), so `#networking` finds chunks tagged `networking`
  whose text never says it. Filters used the exact keyword `tags` until schema version 8 (`tags.key`,
  below). (Schema version 2; version 1 indices
  are reindexed and the alias swapped by `ensure_index` at start.)
- `context` (schema version 3) holds the chunk's own context (`app.engines.lexical_context`; up to
  version 3 also its neighbours' edges), `english` text, searched by the `multi_match` at a low boost
  (`CONTEXT_BOOST`) and never returned; excluded terms are not looked for there.
- `titled_content` (schema version 4) is the chunk's breadcrumb and text in one `english` field
  (`titled_text`, what tantivy's content field holds and the vector leg embeds). The query searches it
  in place of `content`, `section_title` and `breadcrumb`: as one field a title word counts like a body
  word, where the reference's separate title fields outranked the text (docs/evaluation.md). `content`,
  `breadcrumb` and `section_title` stay mapped: they rebuild the `Chunk` a hit returns.
- `outbox_version` (schema version 5, `long`) is the outbox version a chunk was written at, the same
  number OpenSearch holds as its external `_version`: deletes of superseded chunks are bounded by it,
  so a slow outbox worker holding an older snapshot never removes a newer one's chunks
  (`app.engines.opensearch_bodies`). Chunks reindexed from version 4 have none and count as oldest.
- `marker_project_id` and `marker_document_id` (schema version 6, keywords) are the only fields of a
  document's version marker (`app.engines.opensearch_markers`): one document per source document,
  externally versioned on the newest outbox version that started writing it, so a stale writer of
  chunk ids the newer snapshot never had is refused too. Markers have no chunk field, so no chunk query
  matches one and they add nothing to BM25's per-field statistics.
- Schema version 7 changes no field: it is the layout of one index per project
  (`app.engines.opensearch_projects`, `<alias>-p-<project>-v7` behind `<alias>-p-<project>`), one primary
  shard each, so a project's BM25 statistics are its own. The shared `<alias>-v6` of earlier versions is
  not copied: its alias is retired at start and every project is rebuilt from PostgreSQL
  (`app.engines.opensearch_lifecycle.prepare_project_indexes`).
- `tags.key` (schema version 8) is each tag through the `lowercase` normalizer `tag_key`, what tag filters
  compare, so they ignore case as PostgreSQL and tantivy do (`app.domain.tags`). `tags` keeps the tags as
  written. A version 7 index is upgraded by `ensure_index`: `_reindex` fills the sub-field from `_source`.
- `english_folded` (schema version 9) analyzes every text field the query searches: OpenSearch's
  `english` analyzer rebuilt as a custom one with `asciifolding` after `lowercase`, so `zurich`, `resume`
  and `sta` find `Zürich`, `résumé` and `šta` as they do in tantivy. It drops what follows an apostrophe
  (`apostrophe`) where `english` strips a possessive `'s`: `Caroline's` is `caroline` in both, `don't` is
  `don` (tantivy: `don`, `t`), `O'Neil` is `o` (tantivy: `o`, `neil`; `english`: `o'neil`). The
  possessive stemmer was not kept because osmem-server, the OpenSearch-API server the tests run on,
  matches every document to any query when a custom analyzer holds it (noida-db and OpenSearch do not).
  A version 8 index is upgraded by `_reindex`, which analyzes `_source` again.
- Schema version 10 splits words at a colon (`colon_as_space`, a `pattern_replace` char filter): the standard
  tokenizer kept `error:timeout` one token (a colon joins letters in Unicode's word rules), so `timeout`
  did not find it and `-timeout` did not exclude it, where tantivy and PostgreSQL split it. Its index
  follows the alias after `_-v` (`<alias>_-v10`): no project's alias can end so (`_-` is no escape of a
  project id, `app.engines.opensearch_projects`), where `<alias>-v9`, project `coll`'s index, was project
  `coll-v9`'s alias name. Versions up to 9 keep their `-v<N>` names; `ensure_index` upgrades them.
- Schema version 11 splits words at every ASCII character Unicode's word rules join letters or digits
  across (`word_joiners_as_space`: `:` `.` `,` `;` `_`): the standard tokenizer kept `node.js`, `v2.1`,
  `email.md`, `1,000` and `max_connections` one token each, so `node`, `email` or `max connections` found
  them in tantivy (which splits at anything but a letter or digit) and not here. Joiners outside ASCII
  (a middle dot, a typographic apostrophe, ...) still join; an apostrophe is left to `apostrophe`, as above.
- Schema version 12 reads text as tantivy does (`app.domain.text_forms.analysis_form`): every format character
  (category Cf: a left-to-right mark, a bidi embedding or isolate, a zero-width joiner) is dropped
  (`format_characters_dropped`), where the standard tokenizer kept one that follows a letter inside the token,
  so `kubernetes` did not find `Kubernetes<LRM>`; `İ` is read as `I` (`dotted_capital_i`: Lucene lowers it
  to `i`, the emulators did not); and a final sigma as the other after lowercasing (`final_sigma`), so `οδος`
  and `ΟΔΟΣ` (lowered `οδοσ`) are one word. A version 11 index is upgraded by `_reindex`.
- Schema version 13 folds what people leave out when they type, as `analysis_form` does: Arabic harakat, the tatweel
  and Hebrew points are dropped (`diacritics_dropped`), a Greek vowel with a tonos or dialytika and the Russian `ё`
  are read as the plain letter (a `pattern_replace` per plain letter, `folded_as_<code point>`: osmem-server
  ignores a `mapping` char filter). A version 12 index is upgraded by `_reindex`.
- Schema version 14 puts a space before each Thai, Lao, Khmer and Burmese letter (`south_east_asian_spaced`), as
  `analysis_form` does for tantivy: the standard tokenizer kept a whole run of such letters, a sentence written
  without spaces, one token, so no word inside it was found. A letter keeps the marks that follow it. A version
  13 index is upgraded by `_reindex`.
"""

from __future__ import annotations

from typing import Any, Final

from app.domain.text_forms import DIACRITICS, FOLDED_LETTERS, FORMAT_CHARACTERS, SOUTH_EAST_ASIAN_LETTERS

SCHEMA_VERSION: Final = 14
"""Bump when `index_body()` changes: `ensure_index` then builds `<alias>_-v<N>`, reindexes and swaps (per project)."""
FIRST_UNAMBIGUOUS_VERSION: Final = 10
"""The first schema version whose index name no project's alias can equal (`versioned_index_name`)."""
TEXT_ANALYZER: Final = "english_folded"
WORD_JOINERS_AS_SPACE: Final = "word_joiners_as_space"
FORMAT_CHARACTERS_DROPPED: Final = "format_characters_dropped"
DOTTED_CAPITAL_I: Final = "dotted_capital_i"
FINAL_SIGMA: Final = "final_sigma"
DIACRITICS_DROPPED: Final = "diacritics_dropped"
SOUTH_EAST_ASIAN_SPACED: Final = "south_east_asian_spaced"
_FOLDED_LETTER_FILTERS: Final = {
    f"folded_as_{ord(plain):04x}": (plain, letters) for plain, letters in FOLDED_LETTERS.items()
}

_ENGLISH_FILTERS: Final[dict[str, Any]] = {
    FINAL_SIGMA: {"type": "pattern_replace", "pattern": "\u03c2", "replacement": "\u03c3"},
    "english_stop": {"type": "stop", "stopwords": "_english_"},
    "english_stemmer": {"type": "stemmer", "language": "english"},
}
_ENGLISH_FOLDED: Final[dict[str, Any]] = {
    "type": "custom",
    "char_filter": [
        *(WORD_JOINERS_AS_SPACE, FORMAT_CHARACTERS_DROPPED, DOTTED_CAPITAL_I, DIACRITICS_DROPPED),
        *_FOLDED_LETTER_FILTERS,
        SOUTH_EAST_ASIAN_SPACED,
    ],
    "tokenizer": "standard",
    "filter": ["apostrophe", "lowercase", FINAL_SIGMA, "asciifolding", "english_stop", "english_stemmer"],
}


def versioned_index_name(alias: str, version: int = SCHEMA_VERSION) -> str:
    """The concrete index behind `alias` for a schema version: `poimen-chunks-p-notes_-v10`, up to 9 `...-v9`."""
    return f"{alias}{version_suffix(version)}"


def alias_indexes_pattern(alias: str) -> str:
    """A wildcard every index `versioned_index_name(alias, version)` names matches, of any version: `<alias>*`.

    The indexes an alias read of the adapter names (`app.engines.opensearch_lifecycle.indexes_behind`).
    """
    return f"{alias}*"


def version_suffix(version: int) -> str:
    """What follows the alias in the name of its index of schema `version`."""
    return f"_-v{version}" if version >= FIRST_UNAMBIGUOUS_VERSION else f"-v{version}"


def index_body(*, shards: int = 1, replicas: int = 1) -> dict[str, Any]:
    """Settings and mapping of the chunk index (reference §2.2, with the deviations in the module doc)."""
    english_text_with_raw = {
        "type": "text",
        "analyzer": TEXT_ANALYZER,
        "fields": {"raw": {"type": "keyword", "ignore_above": 1024}},
    }
    return {
        "settings": {
            "number_of_shards": shards,
            "number_of_replicas": replicas,
            "index.codec": "best_compression",
            "analysis": {
                "char_filter": {
                    WORD_JOINERS_AS_SPACE: {"type": "pattern_replace", "pattern": "[:.,;_]", "replacement": " "},
                    FORMAT_CHARACTERS_DROPPED: {
                        "type": "pattern_replace",
                        "pattern": f"[{FORMAT_CHARACTERS}]",  # `\\p{Cf}` is refused by noida-db
                        "replacement": "",
                    },
                    DOTTED_CAPITAL_I: {"type": "pattern_replace", "pattern": "\u0130", "replacement": "I"},
                    DIACRITICS_DROPPED: {"type": "pattern_replace", "pattern": f"[{DIACRITICS}]", "replacement": ""},
                    **{
                        name: {"type": "pattern_replace", "pattern": f"[{letters}]", "replacement": plain}
                        for name, (plain, letters) in _FOLDED_LETTER_FILTERS.items()
                    },
                    SOUTH_EAST_ASIAN_SPACED: {
                        "type": "pattern_replace",
                        "pattern": f"([{SOUTH_EAST_ASIAN_LETTERS}])",
                        "replacement": " $1",
                    },
                },
                "filter": _ENGLISH_FILTERS,
                "analyzer": {
                    TEXT_ANALYZER: _ENGLISH_FOLDED,
                    "ngram_analyzer": {"type": "custom", "tokenizer": "ngram_tokenizer", "filter": ["lowercase"]},
                },
                # `app.domain.tags.tag_key`: a tag filter ignores case (term queries are normalized too).
                "normalizer": {"tag_key": {"type": "custom", "filter": ["lowercase"]}},
                "tokenizer": {
                    "ngram_tokenizer": {
                        "type": "ngram",
                        "min_gram": 3,
                        "max_gram": 4,
                        "token_chars": ["letter", "digit"],
                    },
                },
            },
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"schema_version": SCHEMA_VERSION},
            "properties": {
                "chunk_id": {"type": "keyword"},
                "document_id": {"type": "keyword"},
                "project_id": {"type": "keyword"},
                "content": {
                    "type": "text",
                    "analyzer": TEXT_ANALYZER,
                    "fields": {
                        # 8191 chars stay under Lucene's 32766-byte term limit even at 4 UTF-8 bytes each.
                        "raw": {"type": "keyword", "ignore_above": 8191},
                        "ngram": {"type": "text", "analyzer": "ngram_analyzer"},
                    },
                },
                "titled_content": {"type": "text", "analyzer": TEXT_ANALYZER},
                "section_title": {"type": "text", "analyzer": TEXT_ANALYZER},
                "breadcrumb": english_text_with_raw,
                "source": english_text_with_raw,
                "tags": {
                    "type": "keyword",
                    "fields": {
                        "text": {"type": "text", "analyzer": TEXT_ANALYZER},
                        "key": {"type": "keyword", "normalizer": "tag_key"},
                    },
                },
                "context": {"type": "text", "analyzer": TEXT_ANALYZER},
                "level": {"type": "keyword"},
                "position": {"type": "integer"},
                "chunk_hash": {"type": "keyword", "index": False},
                "event_time": {"type": "date"},
                "indexed_at": {"type": "date"},
                "outbox_version": {"type": "long"},
                "marker_project_id": {"type": "keyword"},
                "marker_document_id": {"type": "keyword"},
            },
        },
    }
