"""Which scripts and spellings the lexical leg finds, on every lexical adapter: a matrix of found / missed.

Each case files one note (through the ingestion's `canonical_document`, as `poimen ingest` and the API do)
among a few others, and searches it with queries typed by a person (through the `QueryOptimizer`, as a search
request is): the same word in another form (NFD, without diacritics, in capitals, ...) or inside a sentence
in a script written without spaces. A query "finds" the note when the note is among its hits.

Adapters: the in-memory fake, tantivy (the embedded default), and the OpenSearch adapter on both
OpenSearch-API servers from PyPI (osmem-server, noida-db), all started here on loopback and stopped.

Usage:
    .venv/bin/python scripts/probe_scripts.py            # the matrix; a line per query that any adapter misses
"""

# ruff: noqa: RUF001 - the cases are letters of other scripts that look like Latin ones, on purpose

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import unicodedata
import urllib.request
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Final

import loopback_service
from opensearchpy import AsyncOpenSearch
from osmem_server import OsmemServer

from app.domain.models import Chunk, DocumentChunks, Filters
from app.domain.text_forms import canonical_text
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.tantivy_index import TantivyLexicalIndex
from app.query.optimizer import QueryOptimizer

if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.domain.ports import LexicalIndex

PROJECT: Final = "scripts"
READY_TIMEOUT_S: Final = 20.0
FILLER: Final = (
    "The deployment finished without errors.",
    "Remember to rotate the database credentials every quarter.",
    "Lunch on Friday is at the usual place.",
)


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    queries: tuple[str, ...]


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


CASES: Final = (
    Case("thai", "ฉันชอบกินข้าวผัดกับเพื่อนที่ร้านอาหาร", ("ข้าวผัด", "เพื่อน", "ร้านอาหาร")),
    Case("thai-alone", "ข้าวผัด", ("ข้าวผัด",)),
    Case("lao", "ຂ້ອຍມັກກິນເຂົ້າໜຽວກັບໝູ່", ("ເຂົ້າໜຽວ", "ໝູ່")),
    Case("khmer", "ខ្ញុំចូលចិត្តញ៉ាំបាយជាមួយមិត្តភក្តិ", ("បាយ", "មិត្តភក្តិ")),
    Case("burmese", "ကျွန်တော်ထမင်းစားတယ်", ("ထမင်း",)),
    Case("arabic-plain", "ذهب محمد إلى المكتبة لقراءة كتاب", ("محمد", "المكتبة", "كتاب")),
    Case("arabic-harakat-doc", "ذَهَبَ مُحَمَّدٌ إِلَى المَكْتَبَةِ", ("محمد", "المكتبة", "مُحَمَّدٌ")),
    Case("arabic-harakat-query", "ذهب محمد إلى المكتبة", ("مُحَمَّد", "المَكْتَبَة")),
    Case("arabic-tatweel", "اجتماع مـــحـــمـــد غدا", ("محمد",)),
    Case("hebrew-niqqud-doc", "שָׁלוֹם עֲלֵיכֶם מִשְׁפָּחָה", ("שלום", "משפחה", "שָׁלוֹם")),
    Case("hebrew-plain-doc", "שלום עליכם משפחה", ("שָׁלוֹם", "שלום")),
    Case("hindi", "मुझे हिंदी में किताब पढ़ना पसंद है", ("किताब", "हिंदी", "पढ़ना", nfd("पढ़ना"))),
    Case("hindi-nukta-precomposed", "\u095d\u0928\u093e \u0915\u093c\u0932\u092e", ("ढ़ना", "क़लम")),
    Case("cyrillic", "МОСКВА — столица России", ("москва", "Москва", "столица", "СТОЛИЦА")),
    Case("cyrillic-yo", "Ёлка стоит в зале", ("ёлка", "елка")),
    Case("greek", "Η ΟΔΟΣ Ερμού στην Αθήνα", ("οδος", "ΟΔΟΣ", "Αθηνα", "αθήνα")),
    Case("turkish-dotted", "İSTANBUL ve İzmir", ("istanbul", "İstanbul", "izmir")),
    Case("turkish-dotless", "Işık ve kapı açık", ("ışık", "isik", "kapi", "KAPI", "ACIK")),
    Case("german-eszett", "Die Straße ist gesperrt", ("straße", "strasse", "STRASSE")),
    Case("german-capital-eszett", "DIE STRAẞE IST GESPERRT", ("straße", "strasse")),
    Case("vietnamese-nfc", "Hội nghị ở Việt Nam", ("việt", nfd("việt"), "viet", "hội nghị")),
    Case("vietnamese-nfd", nfd("Hội nghị ở Việt Nam"), ("việt", nfd("việt"), "viet")),
    Case("emoji", "Deploy done 🚀 and the team 👩\u200d💻 celebrated", ("🚀", "👩\u200d💻")),
    Case("zwsp", "the in\u200bvisible wall and the soft\u00adware", ("invisible", "software")),
    Case("fullwidth-doc", "ＡＢＣ Ｃｏｒｐ ｒｅｌｅａｓｅ ２０２６", ("abc", "corp", "2026")),
    Case("fullwidth-query", "ABC Corp release", ("ＡＢＣ", "Ｃｏｒｐ")),
    Case("ligature-doc", "the ﬁle was ﬂagged", ("file", "flagged")),
    Case("ligature-query", "the file was flagged", ("ﬁle", "ﬂagged")),
)


def chunk(chunk_id: str, text: str) -> Chunk:
    return Chunk(
        chunk_id=chunk_id,
        document_id=chunk_id,
        project_id=PROJECT,
        text=canonical_text(text),
        source=f"notes/{chunk_id}.md",
        level="L1",
        breadcrumb=(),
        section_title="",
        position=0,
        tags=(),
        event_time=None,
        chunk_hash=chunk_id,
        context="",
    )


def corpus() -> list[DocumentChunks]:
    chunks = [chunk(case.name, case.text) for case in CASES]
    chunks += [chunk(f"filler-{number}", text) for number, text in enumerate(FILLER)]
    return [DocumentChunks(PROJECT, item.document_id, (item,)) for item in chunks]


async def hit_ids(index: LexicalIndex, optimizer: QueryOptimizer, query: str) -> list[str]:
    lexical_query = optimizer.analyze(query).lexical_query
    hits = await index.search(lexical_query, top_k=10, filters=Filters(project_id=PROJECT))
    return [hit.chunk_id for hit in hits]


async def probe(indexes: dict[str, LexicalIndex]) -> int:
    optimizer = QueryOptimizer()
    documents = corpus()
    for index in indexes.values():
        await index.replace_documents(documents)
    missed = 0
    print(f"{'case':<26} {'query':<16} {'lexical terms':<24} " + " ".join(f"{name:<8}" for name in indexes))
    for case in CASES:
        for query in case.queries:
            found = [case.name in await hit_ids(index, optimizer, query) for index in indexes.values()]
            marks = ["ok" if hit else "MISS" for hit in found]
            missed += found.count(False)
            terms = optimizer.analyze(query).lexical_query.text
            shown = query if unicodedata.is_normalized("NFC", query) else query + " (NFD)"
            print(f"{case.name:<26} {shown:<16} {terms!r:<24} " + " ".join(f"{mark:<8}" for mark in marks))
    return missed


def start_noida(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = loopback_service.free_port()
    command = [str(files("noida_db").joinpath("noida-db")), "start", "--only", "elasticsearch"]
    command += ["--host", "127.0.0.1", "--elasticsearch-port", str(port), "--data-dir", str(data_dir)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                json.load(response)
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.1)
        else:
            return server, url


@dataclass
class Servers:
    osmem: OsmemServer
    noida: subprocess.Popen[bytes]
    noida_url: str

    @classmethod
    def started(cls, data_dir: Path) -> Servers:
        noida, url = start_noida(data_dir / "noida")
        return cls(OsmemServer.start(japanese=False, addr="127.0.0.1:0"), noida, url)

    def stop(self) -> None:
        self.osmem.close()
        self.noida.terminate()
        self.noida.wait(timeout=30)


async def run(data_dir: Path, servers: Servers) -> int:
    osmem_client = AsyncOpenSearch(hosts=[servers.osmem.url], timeout=30)
    noida_client = AsyncOpenSearch(hosts=[servers.noida_url], timeout=30)
    indexes: dict[str, LexicalIndex] = {
        "memory": InMemoryLexicalIndex(),
        "tantivy": TantivyLexicalIndex(data_dir / "tantivy"),
        "osmem": OpenSearchLexicalIndex(osmem_client, index="probe-scripts", replicas=0, timeout_s=30.0),
        "noida": OpenSearchLexicalIndex(noida_client, index="probe-scripts", replicas=0, timeout_s=30.0),
    }
    try:
        return await probe(indexes)
    finally:
        for name in ("memory", "tantivy"):
            await indexes[name].close()  # type: ignore[attr-defined]
        await osmem_client.close()
        await noida_client.close()


def temporary_folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="probe-scripts-") as name:
        yield Path(name)


def main() -> None:
    for data_dir in temporary_folder():
        servers = Servers.started(data_dir)
        try:
            missed = asyncio.run(run(data_dir, servers))
        finally:
            servers.stop()
        print(f"{missed} misses")
        sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
