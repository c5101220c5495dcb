"""A real RunContext over a copy of the example project, and a trace database in tmp."""

from __future__ import annotations

import pytest

from crossbuild import kb
from crossbuild.foundation.targets import parse_target
from crossbuild.tools.context import RunContext
from crossbuild.trace.store import Trace
from tests.conftest import copy_example


@pytest.fixture
def ctx(tmp_path):
    root = tmp_path / "ws"
    copy_example(root / "src")
    return RunContext.create(root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())


@pytest.fixture
def trace(tmp_path):
    t = Trace(tmp_path / "runs.db")
    yield t
    t.close()
