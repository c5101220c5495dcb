"""Retrieval evaluation of the knowledge base on a labelled query set: Recall@1, Recall@3 and MRR per kind of
query, the false-attachment rate on outputs that match no entry, and milliseconds per query."""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from importlib import resources

from crossbuild.kb.base import MIN_BM25_SCORE, MIN_RELATED_SCORE, KnowledgeBase

KINDS = ("fixture", "paraphrase", "unseen", "heldout")


@dataclass
class Query:
    text: str
    expect: str  # entry id, or "" when nothing should match
    kind: str


@dataclass
class KindScore:
    n: int = 0
    hits1: int = 0
    hits3: int = 0
    rr: float = 0.0
    misses: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def recall1(self) -> float:
        return self.hits1 / self.n if self.n else 0.0

    @property
    def recall3(self) -> float:
        return self.hits3 / self.n if self.n else 0.0

    @property
    def mrr(self) -> float:
        return self.rr / self.n if self.n else 0.0


@dataclass
class EvalReport:
    kinds: dict[str, KindScore]
    negatives: int
    false_attachments: int
    false_examples: list[tuple[str, list[str]]]
    ms_per_query: float
    queries: int
    entries: int

    # top-1 precision by how far a match is trusted (Match.fit): (matches, right), as search gives them, and by
    # words alone (fingerprints ignored): what a "related" or "weak" match is worth when nothing recognised the text
    trust: dict[str, tuple[int, int]] = field(default_factory=dict)
    words_alone: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def false_attachment_rate(self) -> float:
        return self.false_attachments / self.negatives if self.negatives else 0.0


def load_queries(kb: KnowledgeBase) -> list[Query]:
    raw = tomllib.loads(resources.files("crossbuild.kb").joinpath("queries.toml").read_text())
    queries = [Query(q["text"], q["expect"], q["kind"]) for q in raw.get("query", [])]
    unknown = {q.expect for q in queries if q.expect and q.expect not in kb.entries}
    if unknown:
        raise ValueError(f"queries.toml expects entries that do not exist: {', '.join(sorted(unknown))}")
    fixtures = [Query(f, e.id, "fixture") for e in kb.entries.values() for f in e.fixtures]
    return fixtures + queries


def evaluate(kb: KnowledgeBase, queries: list[Query] | None = None, *, min_score: float | None = None) -> EvalReport:
    queries = queries if queries is not None else load_queries(kb)
    kinds = {k: KindScore() for k in KINDS}
    negatives = false = 0
    false_examples = []
    start = time.perf_counter()
    for q in queries:
        ranked = [m.entry.id for m in kb.search(q.text, limit=5, min_score=min_score)]
        if not q.expect:  # negatives (and held-out negatives): nothing may be attached
            negatives += 1
            attached = ranked[:2]
            if attached:
                false += 1
                false_examples.append((q.text[:100], attached))
            continue
        s = kinds.setdefault(q.kind, KindScore())
        s.n += 1
        if q.expect in ranked:
            pos = ranked.index(q.expect) + 1
            s.rr += 1 / pos
            s.hits1 += pos == 1
            s.hits3 += pos <= 3
        if not ranked or ranked[0] != q.expect:
            s.misses.append((q.text[:100], ranked[:3]))
    elapsed = time.perf_counter() - start
    trust, words_alone = _trust(kb, [q for q in queries if q.kind != "fixture"])
    return EvalReport(kinds=kinds, negatives=negatives, false_attachments=false, false_examples=false_examples,
                      ms_per_query=1000 * elapsed / max(1, len(queries)), queries=len(queries), entries=len(kb),
                      trust=trust, words_alone=words_alone)


def _trust(kb: KnowledgeBase, queries: list[Query]) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """Top-1 precision of each kind of match on QUERIES (none of them an entry's own fixture; a negative's match
    is wrong whatever it is)."""
    trust: dict[str, list[int]] = {}
    alone: dict[str, list[int]] = {}
    for q in queries:
        top = kb.search(q.text, limit=1, min_score=MIN_RELATED_SCORE)
        if top:
            t = trust.setdefault(top[0].fit, [0, 0])
            t[0], t[1] = t[0] + 1, t[1] + (top[0].entry.id == q.expect)
        words = kb.words_only(q.text)
        if words and words[0][1] >= MIN_RELATED_SCORE:
            a = alone.setdefault("related" if words[0][1] >= MIN_BM25_SCORE else "weak", [0, 0])
            a[0], a[1] = a[0] + 1, a[1] + (words[0][0] == q.expect)
    return {k: (n, r) for k, (n, r) in trust.items()}, {k: (n, r) for k, (n, r) in alone.items()}
