"""A real RunContext over a tmp workspace laid out like a run: src/ (the example project), build/, .xbuild/; with a
sibling folder `<name>-backup` and a file outside, so escapes have something real to reach for."""

from __future__ import annotations

import json

import pytest

from crossbuild import kb
from crossbuild.foundation.targets import parse_target
from crossbuild.tools import default_toolset
from crossbuild.tools.context import RunContext
from tests.conftest import copy_example


@pytest.fixture
def ctx(tmp_path):
    root = tmp_path / "w" / "demo"
    copy_example(root / "src")
    (root / "build").mkdir()
    backup = tmp_path / "w" / "demo-backup"
    backup.mkdir()
    (backup / "secret.txt").write_text("backup secret\n")
    (tmp_path / "outside.txt").write_text("outside secret\n")
    return RunContext.create(root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())


@pytest.fixture
def tools():
    return default_toolset()


@pytest.fixture
def call(ctx, tools):
    """Dispatch like a model does: the arguments as a JSON string."""
    def call(name, args=None, raw=None):
        return tools.dispatch(ctx, name, raw if raw is not None else json.dumps(args or {}))
    return call
