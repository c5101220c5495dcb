"""Knowledge base of cross-build failures: shipped entries, matching by fingerprint then BM25, compact rendering."""

from crossbuild.kb.base import Entry, KnowledgeBase, Match, load

__all__ = ["Entry", "KnowledgeBase", "Match", "load"]
