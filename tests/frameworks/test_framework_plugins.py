"""Frameworks are plugins: found through the ``mastif.frameworks`` entry-point group.

``tests/plugins/tiny_framework`` is an installed distribution in the sense Python means it
(a module beside a ``.dist-info`` folder whose ``entry_points.txt`` registers it); putting
its folder on ``sys.path`` installs it, as site-packages would.
"""

from __future__ import annotations

import importlib.metadata

import pytest

from mastif.core.config import ConfigError
from mastif.execution.experiment import validate_config
from mastif.frameworks import (
    FRAMEWORKS,
    FrameworkNotFound,
    available_frameworks,
    get_framework,
)
from tests.support.fakes import ScriptedChatServer
from tests.support.paths import TESTS
from tests.support.stackrun import run_stack

PLUGIN = TESTS / "plugins" / "tiny_framework"


@pytest.fixture
def tiny_installed(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    return "tiny"


def test_the_built_in_frameworks_register_through_the_entry_point_group():
    # no table inside mastif: they come from mastif's own pyproject entry points. Each loads
    # in its own environment (tests/frameworks/test_framework_env.py); the harness has none
    assert set(FRAMEWORKS) <= set(available_frameworks())
    for name in FRAMEWORKS:
        with pytest.raises(FrameworkNotFound, match="cannot be loaded"):
            get_framework(name)


def test_a_plugin_is_found_once_installed(tiny_installed):
    assert "tiny" in available_frameworks()
    assert type(get_framework("tiny")).__name__ == "TinyAdapter"


def test_an_unknown_framework_is_named_with_what_is_installed():
    with pytest.raises(
        FrameworkNotFound, match=r"unknown framework 'tiny'; installed: ag2, agent_framework, agno"
    ):
        get_framework("tiny")


def test_the_config_accepts_a_plugins_name_only_when_it_is_installed(
    fake_model_config, monkeypatch
):
    cfg = fake_model_config("http://127.0.0.1:9/v1")
    cfg["frameworks"] = ["langgraph", "tiny"]
    with pytest.raises(ConfigError, match=r"frameworks: unknown framework 'tiny'"):
        validate_config(cfg)
    monkeypatch.syspath_prepend(str(PLUGIN))
    assert validate_config(cfg)["frameworks"] == ["langgraph", "tiny"]


def test_a_plugin_runs_a_whole_stack_through_the_runner(
    tiny_installed, tmp_path, fake_model_config
):
    with ScriptedChatServer(lambda payload: {"content": "Done. TASK COMPLETE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        (trace,) = run_stack(cfg, tmp_path, framework="tiny")
    assert trace.status == "ok", trace.error_message
    assert trace.framework == "tiny"
    # the loop ended at the first observe: navigate, observe, report — via the gateway
    assert [(n.node, n.step) for n in trace.node_outputs] == [
        ("navigate", 1), ("observe", 1), ("report", 1),
    ]  # fmt: skip
    assert [c.node for c in trace.llm_calls] == ["navigate", "observe", "report"]
    assert trace.final_answer == "Done. TASK COMPLETE"
    # the plugin's packages, which have no column of their own, are still recorded
    assert trace.other_packages == f"httpx=={importlib.metadata.version('httpx')}"


def test_a_registered_name_that_cannot_load_is_a_clear_error(tmp_path, monkeypatch):
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mastif.frameworks]\nbroken = no_such_module:X\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(FrameworkNotFound, match=r"'broken' is registered as 'no_such_module:X'"):
        get_framework("broken")


def test_the_runner_closes_what_a_framework_opened_for_the_run(
    tiny_installed, tmp_path, fake_model_config, monkeypatch
):
    # frameworks keep per-run objects in ctx.built and their open resources in
    # ctx.resources; the runner closes them when the run ends, also on a timeout
    import asyncio

    import tiny_framework

    closed: list[str] = []
    real_run = tiny_framework.TinyAdapter.run

    async def run(self, ctx):
        ctx.built["tiny"] = object()
        ctx.resources.push_async_callback(asyncio.sleep, 0)
        ctx.resources.callback(lambda: closed.append(ctx.run_id))
        if ctx.task.task_id == "slow":
            await asyncio.sleep(60)
        return await real_run(self, ctx)

    monkeypatch.setattr(tiny_framework.TinyAdapter, "run", run)
    from mastif.tasks import load_tasks

    first = load_tasks("builtin")[0]
    slow = first.model_copy(update={"task_id": "slow"})
    with ScriptedChatServer(lambda payload: {"content": "Done. TASK COMPLETE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, timeout_s=2)
        traces = run_stack(cfg, tmp_path, [first, slow], framework="tiny")
    assert [t.status for t in traces] == ["ok", "timeout"]
    assert closed == [t.run_id for t in traces]


def test_the_plugin_api_paths_from_before_the_subpackages_still_import():
    """docs/frameworks.md's plugin API moved into subpackages (issue 39); a plugin written
    against the old paths (tiny_framework imports ``mastif.workflow``) gets the same module
    objects as mastif's own adapters, not copies."""
    import importlib

    from mastif._compat import MOVED_PLUGIN_API

    for old, new in MOVED_PLUGIN_API.items():
        assert importlib.import_module(old) is importlib.import_module(new)
        assert importlib.import_module(old).__spec__.name == new
    from mastif.orchestration import visit_node
    from mastif.workflow import drive_workflow, render_prompt

    from mastif.frameworks import orchestration, plan

    assert (visit_node, drive_workflow, render_prompt) == (
        orchestration.visit_node,
        plan.drive_workflow,
        plan.render_prompt,
    )
