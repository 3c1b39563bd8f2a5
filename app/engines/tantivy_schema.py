"""What the tantivy lexical index files: its schema, its English analyzer and the document of a chunk.

Analysis is English: split on anything but letters, digits and marks, each Han or Hiragana character a word of its
own (as Lucene's standard tokenizer splits Chinese and Japanese), drop tokens over 40 chars, lowercase, fold to ASCII
(`résumé` is `resume`, `Đoković` is `dokovic`), Lucene's 33 English stop words, Snowball English stemmer
(close to the OpenSearch adapter's `english_folded` analyzer: `app.engines.opensearch_mapping`). Text reaches
it, filed or searched, in `app.domain.text_forms.analysis_form`: format characters and Arabic and Hebrew
diacritics dropped, `İ` as `I`, a final sigma as U+03C3, a Greek tonos and the Russian `ё` folded, each Thai,
Lao, Khmer and Burmese letter a word with its marks.

The content field holds the chunk's breadcrumb and text in one field, and a low-boost `context`
field its own context (`app.engines.lexical_context`). Chunk tags are searched as words too
(`tags_text`), so a `#networking` query finds chunks tagged `networking` whose text never says it.
The whole chunk is stored as a JSON payload (`app.engines.chunk_codec`), and a hit is rebuilt from it.

Changing any of this changes what is on disk: bump `SCHEMA_VERSION`, and an older folder is
recreated empty at open (`app.engines.tantivy_folders`) and refilled from PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec
import tantivy

from app.domain.moments import as_utc
from app.domain.tags import tag_keys
from app.domain.text_forms import analysis_form
from app.engines.chunk_codec import chunk_from_record, chunk_to_record
from app.engines.lexical_context import DEFAULT_CONTEXT_MAX_CHARS, lexical_text

if TYPE_CHECKING:
    from app.domain.models import Chunk

ANALYZER_NAME: Final = "poimen_english"
DOCUMENT_KEY_SEPARATOR: Final = "\x1f"  # project ids are [A-Za-z0-9._-], so the key cannot be ambiguous
MAX_TOKEN_CHARS: Final = 40  # longer "words" are hashes, base64 or URLs: noise for BM25
WORD_PATTERN: Final = (
    r"[\p{Han}\p{Hiragana}]"
    r"|[[\p{Alphabetic}\p{N}]--[\p{Han}\p{Hiragana}]]"  # a letter or digit starts a word
    r"[[\p{Alphabetic}\p{N}\p{M}]--[\p{Han}\p{Hiragana}]]*"
)
"""A word: one Han or Hiragana character, or a run of other letters, digits and combining marks. Outside Chinese and
Japanese and text holding a mark this is tantivy's `simple` tokenizer exactly (`char::is_alphanumeric` is Alphabetic
or Numeric): every SciFact and LoCoMo text, corpus and queries, analyzes to the same terms with either. A mark
(a virama, a nukta, a Thai tone mark) is part of the word it follows, as in Lucene's word rules (`simple` cut `पढ़ना`
at it); a mark after no letter (an emoji's variation selector) is no word."""

SCHEMA_VERSION: Final = 10
"""What the adapter files in its folder. 1: title fields apart and neighbour context (no version file).
2: one index for every project. 3: an index per project (`app.engines.tantivy_folders`). 4: the `tags`
filter field holds each tag's key (`app.domain.tags`), so tag filters ignore case. 5: terms are folded
to ASCII, so a query typed without accents finds the accented word and the other way round. 6: each Han
and Hiragana character is a word (`WORD_PATTERN`), so `東京` finds `東京で会議`. 7: project folder names hold no
uppercase letter (`app.engines.tantivy_folder_names`), so `Acme` and `acme` never share one where case is ignored;
files are as in 6, and a version 6 root has its folders renamed at open, not rebuilt. 8: text is analyzed in
`analysis_form`, so `istanbul` finds `İstanbul`, `οδος` finds `ΟΔΟΣ` and `microservice` finds `micro<ZWJ>service`;
a root of any older version is rebuilt. 9: `analysis_form` also drops Arabic harakat, the tatweel and Hebrew points and
folds a Greek tonos and the Russian `ё`, so `محمد` finds `مُحَمَّد`; an older root is rebuilt. 10: each Thai, Lao, Khmer
and Burmese letter is a word with its marks (`analysis_form`) and a mark never cuts a word (`WORD_PATTERN`), so a Thai
word inside a run is found; an older root is rebuilt."""
SCHEMA_VERSION_FILE: Final = "poimen-schema-version"

# Fields searched by the free text; each is analyzed with the English analyzer.
CONTENT: Final = "content"  # the chunk's breadcrumb and text (app.engines.lexical_context)
SOURCE: Final = "source"
TAGS_TEXT: Final = "tags_text"  # the tags as words; `TAGS` below keeps their keys for filters
CONTEXT: Final = "context"  # the chunk's own context (app.engines.lexical_context), low boost
# Keyword fields (raw tokenizer, exact values) used by filters and deletes.
SOURCE_KEYWORD: Final = "source_keyword"
PROJECT_ID: Final = "project_id"
DOCUMENT_ID: Final = "document_id"
DOCUMENT_KEY: Final = "document_key"
CHUNK_ID: Final = "chunk_id"
LEVEL: Final = "level"
TAGS: Final = "tags"  # `app.domain.tags.tag_key` of each tag: filters ignore case
# Microseconds since the epoch: tantivy indexes date fields at second precision, which would make a
# `[from, to)` bound disagree with the vector leg's microsecond timestamps.
EVENT_TIME_US: Final = "event_time_us"
# The whole chunk as JSON, stored only: the hit is rebuilt from it, field for field.
PAYLOAD: Final = "payload"
SCHEMA_FIELD_NAMES: Final = frozenset(
    {
        *(CONTENT, SOURCE, TAGS_TEXT, CONTEXT),
        *(SOURCE_KEYWORD, PROJECT_ID, DOCUMENT_ID, DOCUMENT_KEY, CHUNK_ID, LEVEL, TAGS),
        *(EVENT_TIME_US, PAYLOAD),
    }
)
"""Every field `build_schema()` declares; a test keeps the two equal."""


def build_english_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer used for indexing and for queries: the two must never differ."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(WORD_PATTERN))
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        # Lucene's ASCIIFoldingFilter: people type `zurich`, `resume`, `sta` for `Zürich`, `résumé`, `šta`.
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def build_schema() -> tantivy.Schema:
    """The index schema. A folder built with another version is recreated empty at open (see the module doc)."""
    builder = tantivy.SchemaBuilder()
    for field in (CONTENT, SOURCE, TAGS_TEXT, CONTEXT):
        builder.add_text_field(field, stored=False, tokenizer_name=ANALYZER_NAME, index_option="position")
    for field in (SOURCE_KEYWORD, PROJECT_ID, DOCUMENT_ID, DOCUMENT_KEY, CHUNK_ID, LEVEL, TAGS):
        builder.add_text_field(field, stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field(EVENT_TIME_US, stored=False, indexed=True, fast=True)
    builder.add_bytes_field(PAYLOAD, stored=True, indexed=False)
    return builder.build()


def document_key(project_id: str, document_id: str) -> str:
    """The raw term every chunk of one document shares, for delete-by-document."""
    return f"{project_id}{DOCUMENT_KEY_SEPARATOR}{document_id}"


def epoch_microseconds(moment: datetime) -> int:
    """Whole microseconds since the Unix epoch; a naive datetime is taken as UTC."""
    delta = as_utc(moment) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def encode_chunk(chunk: Chunk) -> bytes:
    """The stored payload of a chunk (its `chunk_codec` record as JSON), decoded by `decode_chunk`."""
    return json.dumps(chunk_to_record(chunk), ensure_ascii=False).encode()


_PAYLOAD_DECODER: Final = msgspec.json.Decoder(dict[str, Any])
"""Every lexical hit's payload is decoded on the search path: msgspec reads a SciFact abstract's (1.8 kB) in a
quarter of `json.loads`'s time, to the same record (`encode_chunk` writes no NaN, no infinity, no lone surrogate).
A malformed payload raises `msgspec.DecodeError`, a `ValueError` as `json.loads`'s is."""


def decode_chunk(payload: bytes) -> Chunk:
    """Rebuild the chunk `encode_chunk` stored."""
    return chunk_from_record(_PAYLOAD_DECODER.decode(payload))


def chunk_document(chunk: Chunk, *, context_max_chars: int = DEFAULT_CONTEXT_MAX_CHARS) -> tantivy.Document:
    """The tantivy document a chunk is filed as: every field of `build_schema()` it has a value for."""
    text = lexical_text(chunk, context_max_chars=context_max_chars)
    document = tantivy.Document()
    document.add_text(CONTENT, analysis_form(text.content))
    document.add_text(CONTEXT, analysis_form(text.context))
    document.add_text(SOURCE, analysis_form(chunk.source))
    for tag in chunk.tags:
        document.add_text(TAGS_TEXT, analysis_form(tag))
    document.add_text(SOURCE_KEYWORD, chunk.source)
    document.add_text(PROJECT_ID, chunk.project_id)
    document.add_text(DOCUMENT_ID, chunk.document_id)
    document.add_text(DOCUMENT_KEY, document_key(chunk.project_id, chunk.document_id))
    document.add_text(CHUNK_ID, chunk.chunk_id)
    document.add_text(LEVEL, chunk.level)
    for key in tag_keys(chunk.tags):
        document.add_text(TAGS, key)
    if chunk.event_time is not None:
        document.add_integer(EVENT_TIME_US, epoch_microseconds(chunk.event_time))
    document.add_bytes(PAYLOAD, encode_chunk(chunk))
    return document
