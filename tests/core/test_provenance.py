"""What software produced a run: the version columns of a run row, the versions table, and
the start-up check of the library members the CrewAI and Semantic Kernel adapters rely on.

No real model: a stack runs against the scripted model server behind the real gateway.
"""

from __future__ import annotations

import platform
import subprocess
from dataclasses import fields
from importlib import metadata
from types import SimpleNamespace

import polars as pl
import pytest

from mastif.core.provenance import (
    PACKAGES,
    PROVENANCE_COLUMNS,
    IncompatibleLibraryError,
    PrivateMember,
    check_private_members,
    collect_provenance,
    mastif_checkout,
    model_server_name,
    stack_packages,
    version_column,
)
from mastif.core.trace import RUN_SCHEMA, RunTrace, conform_to_schema, runs_to_table
from mastif.execution.frameworkenv import framework_env
from mastif.importers import read_mastif_log
from mastif.reporting.report import CAPTIONS, run_versions, to_markdown, versions_table
from tests.support.fakes import ScriptedChatServer
from tests.support.paths import REPO
from tests.support.stackrun import run_stack

PARTIAL_LOG = REPO / "tests" / "fixtures" / "mastif_logs" / "partial-fixture.json"


def git_head() -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


# --------------------------------------------------------------------------- columns


def test_the_provenance_columns_end_the_run_schema():
    names = RUN_SCHEMA.names
    assert tuple(names[-len(PROVENANCE_COLUMNS) :]) == PROVENANCE_COLUMNS
    assert [f.name for f in fields(RunTrace)][-len(PROVENANCE_COLUMNS) :] == list(
        PROVENANCE_COLUMNS
    )
    assert version_column("langchain-mcp-adapters") == "langchain_mcp_adapters_version"
    for column in PROVENANCE_COLUMNS:
        expected = "bool" if column == "mastif_dirty" else "string"
        assert str(RUN_SCHEMA.field(column).type) == expected, column


def test_a_shard_written_before_versions_gathers_with_null_versions():
    trace = RunTrace("r1", "e", "m", "standard", "langgraph", "t1", "task", "site", None, None,
                     "ok", None, None, "answer")  # fmt: skip
    older = runs_to_table([trace]).drop_columns(list(PROVENANCE_COLUMNS))
    table = conform_to_schema(older)
    assert table.schema == RUN_SCHEMA
    for column in PROVENANCE_COLUMNS:
        assert table.column(column).to_pylist() == [None], column


def test_the_versions_table_reads_runs_files_without_version_columns(tmp_path):
    trace = RunTrace("r1", "e", "m", "standard", "langgraph", "t1", "task", "site", None, None,
                     "ok", None, None, "answer", python_version="3.11.2")  # fmt: skip
    older, newer = tmp_path / "older.parquet", tmp_path / "newer.parquet"
    table = runs_to_table([trace])
    pl.from_arrow(table.drop_columns(list(PROVENANCE_COLUMNS))).write_parquet(older)  # type: ignore[union-attr]
    pl.from_arrow(table).write_parquet(newer)  # type: ignore[union-attr]
    runs = run_versions([older, newer])
    assert runs.height == 2 and set(PROVENANCE_COLUMNS) <= set(runs.columns)
    rows = versions_table(runs).select("package", "version", "runs").rows()
    assert ("all packages", "not recorded", 1) in rows and ("python", "3.11.2", 1) in rows


def test_versions_follow_what_the_stack_uses():
    framework = SimpleNamespace(packages=("langgraph", "openai"), mcp_packages=("mcp",))
    assert stack_packages(framework, "standard") == ("langgraph", "openai")
    assert stack_packages(framework, "mcp") == ("langgraph", "openai", "mcp")
    assert stack_packages(framework, "a2a") == ("langgraph", "openai", "a2a-sdk")

    local = collect_provenance(framework, "a2a", "local").columns()
    assert set(local) == set(PROVENANCE_COLUMNS)
    assert local["model_server"] == "xllamacpp"
    assert local["model_server_version"] == metadata.version("xllamacpp")
    assert local["a2a_sdk_version"] == metadata.version("a2a-sdk")
    assert local["crewai_version"] is None and local["mcp_version"] is None  # not used
    assert local["python_version"] == platform.python_version()
    assert local["mastif_version"] == metadata.version("mastif")

    remote = collect_provenance(framework, "standard", "openai_compatible").columns()
    # the server behind a remote endpoint is unknown: null, never a made-up value
    assert remote["model_server"] is None and remote["model_server_version"] is None
    assert "" not in remote.values()

    native = collect_provenance(framework, "standard", "local", "llama-server", "b1234 x").columns()
    assert native["model_server"] == "llama-server" and native["model_server_version"] == "b1234 x"
    # the build wrote nothing beside it: unknown, not the wheel's version
    unknown = collect_provenance(framework, "standard", "local", "llama-server").columns()
    assert unknown["model_server"] == "llama-server" and unknown["model_server_version"] is None


def test_the_model_server_is_named_by_provider_and_build():
    assert model_server_name("local") == "xllamacpp"
    assert model_server_name("local", "xllamacpp") == "xllamacpp"
    assert model_server_name("local", "llama-server") == "llama-server"
    assert model_server_name("scripted") == "mastif"
    # options.server means nothing to a remote endpoint, whose server is unknown
    assert model_server_name("openai_compatible", "llama-server") is None


def test_the_commit_is_this_checkouts():
    commit, dirty = mastif_checkout()
    head = git_head()
    if head is None:
        assert commit is None
    else:
        assert commit == head and isinstance(dirty, bool)


# --------------------------------------------------------------------------- run rows


def test_a_stack_run_records_its_versions(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "TASK COMPLETE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"] = ["standard"]
        (trace,) = run_stack(cfg, tmp_path, framework="langgraph")
    assert trace.status == "ok", trace.error_message
    assert trace.mastif_version == metadata.version("mastif")
    assert trace.python_version == platform.python_version()
    assert trace.mastif_commit == git_head()
    # the versions of LangGraph's own environment, where the run was made (issue 50)
    made_by = env_versions(
        "langgraph", ("langgraph", "langchain-core", "langchain-openai", "openai")
    )
    for package, version in made_by.items():
        assert getattr(trace, version_column(package)) == version, package
    # not used by langgraph under standard
    for package in ("crewai", "semantic-kernel", "langchain", "mcp", "a2a-sdk"):
        assert getattr(trace, version_column(package)) is None, package
    assert trace.model_server is None and trace.model_server_version is None  # remote
    row = runs_to_table([trace]).to_pylist()[0]
    assert row["langgraph_version"] == made_by["langgraph"]
    # the checkpoint keeps them: a resumed job gathers the versions that made the run
    (again,) = run_stack(cfg, tmp_path, framework="langgraph")
    assert again.langgraph_version == trace.langgraph_version
    assert again.mastif_commit == trace.mastif_commit


def env_versions(framework: str, packages: tuple[str, ...]) -> dict[str, str]:
    """What ``framework``'s environment has installed of ``packages``."""
    code = f"import importlib.metadata as m; print(*(m.version(p) for p in {packages!r}))"
    python = str(framework_env(framework).python)
    found = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return dict(zip(packages, found.stdout.split(), strict=True))


def test_imported_runs_have_no_versions(tmp_path):
    table = read_mastif_log(PARTIAL_LOG).runs_table()
    assert table.schema == RUN_SCHEMA and table.num_rows > 0
    for column in PROVENANCE_COLUMNS:
        assert table.column(column).null_count == table.num_rows, column
    path = tmp_path / "runs.parquet"
    pl.from_arrow(table).write_parquet(path)  # type: ignore[union-attr]
    versions = versions_table(run_versions([path]))
    assert versions.select("package", "version").rows() == [("all packages", "not recorded")]


# --------------------------------------------------------------------------- the report


def run_row(model: str, protocol: str, framework: str, **versions: object) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(PROVENANCE_COLUMNS)
    return row | {"model": model, "protocol": protocol, "framework": framework, **versions}


def test_the_versions_table_lists_each_version_with_its_stacks():
    common = {"mastif_version": "0.1.0", "mastif_commit": "abc123", "mastif_dirty": True,
              "python_version": "3.11.2", "openai_version": "2.8.1"}  # fmt: skip
    runs = pl.DataFrame(
        [
            run_row("m", "standard", "langgraph", **common, langgraph_version="1.2.0"),
            run_row("m", "standard", "langgraph", **common, langgraph_version="1.2.1"),
            run_row(
                "m",
                "mcp",
                "crewai",
                **common,
                crewai_version="1.15.2",
                mcp_version="1.30",
                model_server="xllamacpp",
                model_server_version="2026.10.11549",
            ),
            run_row("x", "standard", "langgraph"),  # imported: nothing recorded
        ],
        infer_schema_length=None,
    )
    table = versions_table(runs)
    rows = {(r["package"], r["version"]): r for r in table.iter_rows(named=True)}
    assert list(table.columns) == ["package", "version", "n_stacks", "runs", "stacks"]
    assert rows[("all packages", "not recorded")]["stacks"] == "x, standard, langgraph"
    assert rows[("mastif commit", "abc123 (dirty)")]["runs"] == 3
    assert rows[("openai", "2.8.1")]["stacks"] == "m, mcp, crewai; m, standard, langgraph"
    # the same stack with two versions: two rows
    assert rows[("langgraph", "1.2.0")]["runs"] == rows[("langgraph", "1.2.1")]["runs"] == 1
    assert rows[("model server", "xllamacpp 2026.10.11549")]["stacks"] == "m, mcp, crewai"
    assert rows[("model server", "unknown")]["stacks"] == "m, standard, langgraph"
    assert table["package"].to_list()[0] == "all packages"
    assert set(table["package"]) <= {"all packages", "mastif", "mastif commit", "python",
                                     "model server", *PACKAGES}  # fmt: skip
    md = to_markdown(table, CAPTIONS["versions"])
    assert "| openai | 2.8.1 | 2 | 3 | m, mcp, crewai; m, standard, langgraph |" in md


def test_every_stack_is_all():
    runs = pl.DataFrame(
        [run_row("m", p, "langgraph", python_version="3.11.2") for p in ("standard", "mcp")]
    )
    row = versions_table(runs).filter(pl.col("package") == "python").row(0, named=True)
    assert (row["stacks"], row["n_stacks"], row["runs"]) == ("all 2 stacks", 2, 2)


# --------------------------------------------------------------------------- private members


class Library:
    def _hook(self) -> None: ...

    _value = 3

    def __init__(self) -> None:
        self._state = None


def test_a_missing_member_is_named_with_its_package_version(monkeypatch):
    members = [
        PrivateMember(Library, "_hook", "openai", "overrides it"),
        PrivateMember(Library, "_value", "openai", "reads it", "attribute"),
        PrivateMember(Library, "_state", "openai", "reads it", "instance"),
    ]
    check_private_members(members)  # all there
    monkeypatch.delattr(Library, "_hook")
    monkeypatch.setattr(Library, "_value", None, raising=True)
    with pytest.raises(IncompatibleLibraryError) as err:
        check_private_members([*members, PrivateMember(Library, "_value", "openai", "calls it")])
    text = str(err.value)
    assert f"openai {metadata.version('openai')}: " in text
    assert "tests.core.test_provenance.Library._hook is gone; mastif overrides it" in text
    assert "Library._value is no longer callable; mastif calls it" in text
    assert "pin openai to a tested version (requirements.lock)" in text
    assert len(text.splitlines()) == 2  # the attribute and the instance attribute are fine


def test_mastif_runs_lists_the_versions(tmp_path, capsys):
    from mastif.cli import main

    trace = RunTrace("r1", "e", "m", "standard", "langgraph", "t1", "task", "site", None, None,
                     "ok", None, None, "answer", python_version="3.11.2",
                     langgraph_version="1.2.0")  # fmt: skip
    path = tmp_path / "runs.parquet"
    pl.from_arrow(runs_to_table([trace])).write_parquet(path)  # type: ignore[union-attr]
    assert main(["runs", str(path)]) == 0
    out = capsys.readouterr().out
    assert "langgraph" in out and "1.2.0" in out and "3.11.2" in out
