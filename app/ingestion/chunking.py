"""Markdown chunker: cut a document into sections by ATX heading, then size them.

Contract of `chunk_markdown`:
- Input is markdown or plain text; CRLF and lone CR become LF, a leading BOM is dropped, and YAML
  front matter (`---` first line up to a closing `---` or `...` line, every line between them a
  `key: value`, an indented continuation, a `- item` or a `#` comment, one key a known one such as
  `title`, `tags` or `date`; or nothing at all) is stripped, never chunked. A block of anything else
  (prose or a chat between two rules, even one that reads as YAML) is text.
- Sections start at ATX headings (`#` to `######` followed by a space or the line end, at most three
  spaces of indentation). Lines inside fenced code blocks (``` or ~~~, at most three spaces of
  indentation before the fence) are never headings. Setext
  headings (`Title` over `===`) are not recognised: they stay ordinary text.
- `breadcrumb` is the title followed by the heading path, e.g. ("Networking", "Kubernetes", "Port
  conflicts"). A top heading that repeats the title (same words, any case) is not repeated. An empty
  title is left out of the breadcrumb.
- `level` is the section's depth in the heading tree below the title: "L0" for text before the first
  heading (and under a top heading equal to the title), "L1" for the top headings present, "L2" for
  their children, and so on. Depth follows nesting, not the number of `#`: `#` then `###` makes the
  `###` section L2. So `level == f"L{len(breadcrumb) - 1}"` whenever the title is not empty.
- `section_title` is the nearest heading, or the title for document-level text.
- A chunk's `text` is the raw markdown it covers, stripped, without the heading line that names it
  (that heading is in `section_title` and `breadcrumb`). A heading with no body yields no chunk but
  still appears in its children's breadcrumbs.
- Sections shorter than `min_chars` merge with an adjacent section of the same parent (or their own
  first child) when the result stays within `max_chars`. The merged chunk's breadcrumb is the common
  parent of its parts, and the heading lines of parts below that parent stay in its text.
- Sections longer than `max_chars` are split at sentence ends and line breaks; consecutive pieces
  share up to `overlap_chars` of whole sentences. A sentence longer than `max_chars` is split between
  words, and a word longer than `max_chars` is cut hard. Every chunk text has 1 to `max_chars`
  characters (code points).
- Positions run 0..n-1 in document order. The output depends only on the arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from app.domain.models import ChunkDraft
from app.ingestion.front_matter import split_front_matter

if TYPE_CHECKING:
    from app.config import Settings

CHUNKER_VERSION: Final = 1
"""Bumped whenever the same input would chunk differently, so stored documents are re-chunked."""


@dataclass(frozen=True, slots=True)
class ChunkingPolicy:
    """Chunk size limits in characters, checked on construction (see `chunk_markdown`)."""

    max_chars: int
    overlap_chars: int
    min_chars: int

    def __post_init__(self) -> None:
        _check_policy(max_chars=self.max_chars, overlap_chars=self.overlap_chars, min_chars=self.min_chars)

    @classmethod
    def from_settings(cls, settings: Settings) -> ChunkingPolicy:
        """The policy `CHUNK_MAX_CHARS`, `CHUNK_OVERLAP_CHARS` and `CHUNK_MIN_CHARS` configure."""
        return cls(
            max_chars=settings.chunk_max_chars,
            overlap_chars=settings.chunk_overlap_chars,
            min_chars=settings.chunk_min_chars,
        )


_ATX_HEADING: Final = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES: Final = re.compile(r"(?:^|[ \t]+)#+$")
# At most three spaces before it, as CommonMark has it: four spaces (or a tab) make an indented code line,
# and reading one as a fence swallowed every heading after it.
_FENCE_OPEN: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")

# A piece may start after a sentence end followed by whitespace, after CJK full stops (no space
# needed), or after a line break. Every match ends at a non-space character or at the end.
_PIECE_BOUNDARY: Final = re.compile(
    r"(?:[.!?\u2026]+[\"'\u201d\u2019\u00bb)\]]*|[\u3002\uff01\uff1f]+)\s+|[\u3002\uff01\uff1f]+|\n\s*"
)
_WHITESPACE_RUN: Final = re.compile(r"\s+")


def chunk_markdown(*, title: str, text: str, max_chars: int, overlap_chars: int, min_chars: int) -> list[ChunkDraft]:
    """Cut `text` into chunks of at most `max_chars` characters following the module contract.

    Raises:
        ValueError: `max_chars` < 1, `overlap_chars` outside [0, max_chars), or `min_chars` < 0.
    """
    _check_policy(max_chars=max_chars, overlap_chars=overlap_chars, min_chars=min_chars)
    _, body = split_front_matter(text)
    root = (_collapse(title),) if title.strip() else ()
    sections = _parse_sections(body, root=root)
    if not sections and body.strip():
        # Only headings and no body anywhere: index the headings themselves rather than nothing.
        sections = [_Section(breadcrumb=root, heading_line=None, text=body.strip())]
    groups = _merge_small(sections, root=root, max_chars=max_chars, min_chars=min_chars)
    drafts: list[ChunkDraft] = []
    for group in groups:
        breadcrumb = group.breadcrumb
        section_title = breadcrumb[-1] if breadcrumb else ""
        level = f"L{len(breadcrumb) - len(root)}"
        for piece in split_long_text(group.render(), max_chars=max_chars, overlap_chars=overlap_chars):
            drafts.append(
                ChunkDraft(
                    text=piece, breadcrumb=breadcrumb, section_title=section_title, level=level, position=len(drafts)
                )
            )
    return drafts


def first_heading(text: str) -> str | None:
    """Return the text of the first ATX heading outside code blocks and front matter, or None."""
    _, body = split_front_matter(text)
    fence: str | None = None
    for line in body.split("\n"):
        fence, in_code = _track_fence(line, fence)
        if in_code:
            continue
        heading = _heading(line)
        if heading is not None and heading[1]:
            return heading[1]
    return None


def split_long_text(text: str, *, max_chars: int, overlap_chars: int) -> list[str]:
    """Split stripped `text` into pieces of at most `max_chars`, overlapping by up to `overlap_chars`.

    Cuts fall at sentence ends or line breaks; only a sentence longer than `max_chars` is cut between
    words, and only a word longer than `max_chars` inside itself. Empty text gives no pieces.
    """
    text = text.strip()
    if not text:
        return []
    if len(text) <= max_chars:
        return [text]
    starts = _piece_starts(text, max_chars=max_chars)
    ends = [*starts[1:], len(text)]
    content_ends = [start + len(text[start:end].rstrip()) for start, end in zip(starts, ends, strict=True)]
    pieces: list[str] = []
    first, count = 0, len(starts)
    while True:
        last = first
        while last + 1 < count and content_ends[last + 1] - starts[first] <= max_chars:
            last += 1
        pieces.append(text[starts[first] : content_ends[last]])
        if last + 1 >= count:
            return pieces
        following = last + 1
        # Walk back over whole pieces while they fit the overlap and leave room for the next piece.
        while (
            following - 1 > first
            and content_ends[last] - starts[following - 1] <= overlap_chars
            and content_ends[last + 1] - starts[following - 1] <= max_chars
        ):
            following -= 1
        first = following


@dataclass(slots=True)
class _Section:
    breadcrumb: tuple[str, ...]
    heading_line: str | None
    text: str


@dataclass(slots=True)
class _Group:
    breadcrumb: tuple[str, ...]
    parts: list[_Section] = field(default_factory=list)
    length: int = 0
    """`len(self.render())`, kept as parts are added: rendering the group for every section merged into it
    made chunking quadratic (800,000 one-line sections: 32 s of CPU for one request)."""

    @classmethod
    def of(cls, section: _Section) -> _Group:
        """A group of one section."""
        return cls(breadcrumb=section.breadcrumb, parts=[section], length=len(section.text))

    def render(self) -> str:
        """The group's text; parts below the group's breadcrumb keep their heading line."""
        return "\n\n".join(_rendered(part, self.breadcrumb) for part in self.parts)

    def length_with(self, section: _Section, breadcrumb: tuple[str, ...]) -> int:
        """`len(render())` once `section` is added and the group's breadcrumb is `breadcrumb`."""
        if breadcrumb == self.breadcrumb:
            return self.length + 2 + _rendered_length(section, breadcrumb)
        # A shorter breadcrumb (at most once per level of it) changes which parts keep their heading line.
        return sum(_rendered_length(part, breadcrumb) + 2 for part in (*self.parts, section)) - 2

    def add(self, section: _Section, breadcrumb: tuple[str, ...], length: int) -> None:
        """Add `section` with the group's new `breadcrumb` and `length` (from `length_with`)."""
        self.parts.append(section)
        self.breadcrumb = breadcrumb
        self.length = length


def _keeps_heading(part: _Section, breadcrumb: tuple[str, ...]) -> bool:
    return part.breadcrumb != breadcrumb and part.heading_line is not None


def _rendered(part: _Section, breadcrumb: tuple[str, ...]) -> str:
    return f"{part.heading_line}\n\n{part.text}" if _keeps_heading(part, breadcrumb) else part.text


def _rendered_length(part: _Section, breadcrumb: tuple[str, ...]) -> int:
    own = len(part.text)
    return own + len(part.heading_line) + 2 if _keeps_heading(part, breadcrumb) and part.heading_line else own


def _check_policy(*, max_chars: int, overlap_chars: int, min_chars: int) -> None:
    if max_chars < 1:
        msg = f"max_chars must be at least 1, got {max_chars}"
        raise ValueError(msg)
    if not 0 <= overlap_chars < max_chars:
        msg = f"overlap_chars must be in [0, max_chars), got {overlap_chars}"
        raise ValueError(msg)
    if min_chars < 0:
        msg = f"min_chars must not be negative, got {min_chars}"
        raise ValueError(msg)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _same_words(left: str, right: str) -> bool:
    return _collapse(left).casefold() == _collapse(right).casefold()


def _track_fence(line: str, fence: str | None) -> tuple[str | None, bool]:
    """Return the open fence after `line` and whether `line` belongs to a code block."""
    if fence is not None:
        stripped = line.strip()
        closes = stripped.startswith(fence) and set(stripped) == {fence[0]}
        return (None if closes else fence), True
    match = _FENCE_OPEN.match(line)
    if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
        return None, False
    return match.group(1), True


def _heading(line: str) -> tuple[int, str] | None:
    match = _ATX_HEADING.match(line)
    if match is None:
        return None
    content = _CLOSING_HASHES.sub("", match.group(2) or "")
    return len(match.group(1)), _collapse(content)


def _parse_sections(body: str, *, root: tuple[str, ...]) -> list[_Section]:
    """Split `body` at headings; return the sections that have text, in document order."""
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []  # (heading depth in #'s, heading text) of the open headings
    breadcrumb, heading_line = root, None
    lines: list[str] = []
    fence: str | None = None

    def close_section() -> None:
        text = "\n".join(lines).strip()
        if text:
            sections.append(_Section(breadcrumb=breadcrumb, heading_line=heading_line, text=text))
        lines.clear()

    for line in body.split("\n"):
        fence, in_code = _track_fence(line, fence)
        heading = None if in_code else _heading(line)
        if heading is None or not heading[1]:
            lines.append(line)
            continue
        close_section()
        depth, heading_text = heading
        while stack and stack[-1][0] >= depth:
            stack.pop()
        stack.append((depth, heading_text))
        path = [text for _, text in stack]
        if root and _same_words(path[0], root[0]):
            path = path[1:]
        breadcrumb, heading_line = (*root, *path), line.strip()
    close_section()
    return sections


def _common_prefix(left: tuple[str, ...], right: tuple[str, ...]) -> tuple[str, ...]:
    length = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        length += 1
    return left[:length]


def _merge_small(sections: list[_Section], *, root: tuple[str, ...], max_chars: int, min_chars: int) -> list[_Group]:
    """Greedily merge each section shorter than `min_chars` with its next (or previous) relative."""
    groups: list[_Group] = []
    for section in sections:
        current = groups[-1] if groups else None
        if current is not None:
            common = _common_prefix(current.breadcrumb, section.breadcrumb)
            # Same parent, or the section is the current group's child: never a cousin or an uncle.
            related = len(common) >= max(len(root), len(current.breadcrumb) - 1, len(section.breadcrumb) - 1)
            small = current.length < min_chars or len(section.text) < min_chars
            if related and small:
                length = current.length_with(section, common)
                if length <= max_chars:
                    current.add(section, common, length)
                    continue
        groups.append(_Group.of(section))
    return groups


def _piece_starts(text: str, *, max_chars: int) -> list[int]:
    """Offsets where a piece may start: sentence starts, then word starts inside over-long sentences."""
    sentence_starts = [0, *(match.end() for match in _PIECE_BOUNDARY.finditer(text) if match.end() < len(text))]
    sentence_starts = sorted(set(sentence_starts))
    starts: list[int] = []
    for start, end in zip(sentence_starts, [*sentence_starts[1:], len(text)], strict=True):
        if len(text[start:end].rstrip()) <= max_chars:
            starts.append(start)
            continue
        word_starts = [
            start,
            *(match.end() for match in _WHITESPACE_RUN.finditer(text, start, end) if match.end() < end),
        ]
        for word_start, word_end in zip(word_starts, [*word_starts[1:], end], strict=True):
            word_length = len(text[word_start:word_end].rstrip())
            starts.extend(range(word_start, word_start + max(word_length, 1), max_chars))
    return starts
