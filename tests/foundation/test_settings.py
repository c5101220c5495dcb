"""The settings layers' order, read in-process: command line > CROSSBUILD_* > project file > user file > default."""

from __future__ import annotations

import pytest

from crossbuild.foundation import settings


@pytest.fixture
def layered(tmp_path, monkeypatch):
    user = tmp_path / "xdg" / "crossbuild"
    user.mkdir(parents=True)
    (user / "config.toml").write_text('jobs = 1\nmodel = "openai:gpt-4o-mini"\n[budgets]\nmax_steps = 10\n'
                                      'max_tool_calls = 31\nmax_tokens = 12\n')
    project = tmp_path / "proj"
    project.mkdir()
    (project / "crossbuild.toml").write_text("jobs = 2\n[budgets]\nmax_steps = 20\nmax_tool_calls = 21\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CROSSBUILD_BUDGETS__MAX_STEPS", "30")
    monkeypatch.chdir(project)
    return project


def test_each_layer_overrides_the_ones_below_it_key_by_key(layered):
    r = settings.load({"jobs": 4})
    s = r.settings
    assert (s.jobs, r.origin("jobs")) == (4, "command line")  # command line over everything
    assert (s.budgets.max_steps, r.origin("budgets.max_steps")) == (30, "$CROSSBUILD_BUDGETS__MAX_STEPS")
    assert (s.budgets.max_tool_calls, r.origin("budgets.max_tool_calls")) == (21, str(layered / "crossbuild.toml"))
    assert s.budgets.max_tokens == 12 and r.origin("budgets.max_tokens").endswith("xdg/crossbuild/config.toml")
    assert s.budgets.max_wall_s == 3 * 3600 and r.origin("budgets.max_wall_s") == "default"
    assert s.model == "openai:gpt-4o-mini"


def test_a_project_file_may_lower_a_budget_but_not_raise_it_or_widen_access(layered):
    (layered / "crossbuild.toml").write_text('jobs = 2\nmodel = "planner"\nbase_url = "http://x"\n'
                                             '[budgets]\nmax_tool_calls = 21\nmax_tokens = 13\nmax_steps = "100000"\n')
    r = settings.load({})
    project = str(layered / "crossbuild.toml")
    assert (r.settings.budgets.max_tool_calls, r.origin("budgets.max_tool_calls")) == (21, project)
    assert r.settings.budgets.max_tokens == 12 and r.settings.base_url is None
    assert r.settings.model == "openai:gpt-4o-mini" and r.settings.jobs == 2
    assert r.settings.budgets.max_steps == 30  # the environment's; the project's text "100000" is no way round
    assert [line.split(" (")[0] for line in r.ignored] == [f"{project}: model", f"{project}: base_url",
                                                          f"{project}: budgets.max_tokens = 13",
                                                          f"{project}: budgets.max_steps = 100000"]


def test_the_command_line_beats_the_environment(layered, monkeypatch):
    monkeypatch.setenv("CROSSBUILD_JOBS", "3")
    assert settings.load({}).settings.jobs == 3
    assert settings.load({"jobs": 5}).settings.jobs == 5


def test_crossbuild_model_keeps_its_meaning_for_auto_and_is_not_the_default_model(layered, monkeypatch):
    monkeypatch.setenv("CROSSBUILD_MODEL", "anthropic:claude-haiku-4-5")
    assert settings.load({}).settings.model == "openai:gpt-4o-mini"


def test_no_files_leaves_the_environment_and_the_command_line(layered):
    r = settings.load({"jobs": 6}, use_files=False)
    assert r.files == () and r.settings.jobs == 6 and r.settings.budgets.max_steps == 30
    assert r.settings.budgets.max_tool_calls == 250
