"""Evaluation on real open-source projects: a pinned corpus, a resumable runner (local or Ray), reports, comparisons."""
