"""Task sources beyond the built-in sets: Mind2Web (hub), Online-Mind2Web, local tables.

The hub is never reached: a Hugging Face cache laid out as ``huggingface_hub`` keeps it is
built in a temp directory from the fixtures (written for this project, in Mind2Web's
format), and the hub library itself serves it offline. The error paths meet a closed port
and a loopback server that answers like a gated dataset.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from huggingface_hub import constants as hf_constants

from mastif.evaluation.judge import build_messages
from mastif.tasks import (
    TaskLoadError,
    load_tasks,
    stratified_sample,
    tasks_from_frame,
    tasks_to_frame,
)
from tests.support.hub_cache import COMMIT, FIXTURES, REPO_ID, TRAIN_FILES, make_hub_cache
from tests.support.paths import REPO
from tests.support.servers import QuietHandler, serve


def fixture_records(*names: str) -> list[dict]:
    return [r for n in names for r in json.loads((FIXTURES / n).read_text())]


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An offline hub library whose cache is a fresh temp dir; the extract cache too."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("MASTIF_CACHE", str(tmp_path / "mastif-cache"))
    return cache


# -- Mind2Web from the hub ------------------------------------------------------------


def test_mind2web_from_the_hub_cache_has_its_fields(offline_hub: Path) -> None:
    make_hub_cache(offline_hub)
    tasks = load_tasks("mind2web", splits=["train"], hub={"repo_id": REPO_ID})
    records = fixture_records(*TRAIN_FILES)  # train_2 (file 0) before train_10 (file 1)
    assert [t.task_id for t in tasks] == [r["annotation_id"] for r in records]
    for task, rec in zip(tasks, records, strict=True):
        assert task.website == rec["website"]
        assert task.domain == rec["domain"] and task.subdomain == rec["subdomain"]
        assert task.confirmed_task == rec["confirmed_task"]
        assert task.reference_steps == rec["action_reprs"]
        n = len(rec["action_reprs"])
        assert task.level == ("easy" if n <= 4 else "medium" if n <= 8 else "hard")
        assert task.start_url is None


def test_mind2web_keeps_only_task_fields_in_its_extract_cache(
    offline_hub: Path, tmp_path: Path
) -> None:
    make_hub_cache(offline_hub)
    first = load_tasks("mind2web", hub={"repo_id": REPO_ID})
    extracts = sorted((tmp_path / "mastif-cache" / "mind2web").glob("*.json"))
    assert len(extracts) == 2
    for path in extracts:
        assert "raw_html" not in path.read_text() and "annotation_id" in path.read_text()
    # a second load reads the extracts, not the (here: deleted) data files
    shutil.rmtree(offline_hub / "datasets--osunlp--Mind2Web" / "snapshots" / COMMIT / "data")
    (offline_hub / "datasets--osunlp--Mind2Web" / "snapshots" / COMMIT / "data" / "train").mkdir(
        parents=True
    )
    with pytest.raises(TaskLoadError, match="no data files"):
        load_tasks("mind2web", hub={"repo_id": REPO_ID})
    assert len(first) == 30


def _test_zip(tmp_path: Path, password: str | None) -> Path:
    """test.zip holding test_task/test_task_0.json (encrypted with ``zip -P`` if asked)."""
    staging = tmp_path / "staging" / "test_task"
    staging.mkdir(parents=True)
    shutil.copy(FIXTURES / "mind2web_test_task_0.json", staging / "test_task_0.json")
    archive = tmp_path / "test.zip"
    if password is None:
        with zipfile.ZipFile(archive, "w") as zf:
            zf.write(staging / "test_task_0.json", "test_task/test_task_0.json")
        return archive
    if shutil.which("zip") is None:
        pytest.skip("the zip command (to make an encrypted archive) is not installed")
    subprocess.run(
        ["zip", "-q", "-P", password, str(archive), "test_task/test_task_0.json"],
        cwd=staging.parent, check=True,
    )  # fmt: skip
    return archive


def test_mind2web_test_split_comes_from_the_password_protected_archive(
    offline_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_hub_cache(offline_hub, test_zip=_test_zip(tmp_path, "s3cret"))
    monkeypatch.delenv("MIND2WEB_ARCHIVE_PASSWORD", raising=False)
    with pytest.raises(TaskLoadError, match=r"password-protected: set \$MIND2WEB_ARCHIVE_PASSWORD"):
        load_tasks("mind2web", splits=["test_task"], hub={"repo_id": REPO_ID})
    monkeypatch.setenv("MIND2WEB_ARCHIVE_PASSWORD", "wrong")
    with pytest.raises(TaskLoadError, match="cannot decrypt"):
        load_tasks("mind2web", splits=["test_task"], hub={"repo_id": REPO_ID})
    monkeypatch.setenv("MIND2WEB_ARCHIVE_PASSWORD", "s3cret")
    tasks = load_tasks("mind2web", splits=["train", "test_task"], hub={"repo_id": REPO_ID})
    assert [t.task_id for t in tasks[-4:]] == [f"test-task-{k}" for k in range(4)]
    assert len(tasks) == 34


def test_mind2web_split_missing_from_the_archive_is_named(
    offline_hub: Path, tmp_path: Path
) -> None:
    make_hub_cache(offline_hub, test_zip=_test_zip(tmp_path, None))
    with pytest.raises(TaskLoadError, match="has no test_domain/\\*.json .*holds: test_task"):
        load_tasks("mind2web", splits=["test_domain"], hub={"repo_id": REPO_ID})


def test_mind2web_offline_and_not_cached_says_what_to_do(offline_hub: Path) -> None:
    with pytest.raises(TaskLoadError) as err:
        load_tasks("mind2web", hub={"repo_id": REPO_ID})
    msg = str(err.value)
    assert "osunlp/Mind2Web@main (splits train) is not in the local Hugging Face cache" in msg
    assert "HF_TOKEN" in msg and "No other tasks are used instead" in msg


def test_mind2web_unreachable_hub_is_the_same_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    hub = {"repo_id": REPO_ID, "endpoint": "http://127.0.0.1:9"}
    with pytest.raises(TaskLoadError, match="hub cannot be reached .*Connect"):
        load_tasks("mind2web", hub=hub)


class _GatedHub(QuietHandler):
    """Answers every request as the hub answers for a gated dataset without access."""

    def _gated(self) -> None:
        body = b'{"error": "Access to dataset osunlp/Mind2Web is restricted."}'
        self.send_response(403)
        self.send_header("X-Error-Code", "GatedRepo")
        self.send_header("X-Error-Message", "Access to dataset is restricted.")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = _gated


@pytest.fixture
def gated_hub() -> Iterator[str]:
    with serve(_GatedHub) as hub:
        yield hub.url


def test_mind2web_gated_dataset_says_how_to_get_access(
    gated_hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(TaskLoadError) as err:
        load_tasks("mind2web", hub={"repo_id": REPO_ID, "endpoint": gated_hub})
    msg = str(err.value)
    assert "is gated" in msg and "HF_TOKEN is not set" in msg
    assert "https://huggingface.co/datasets/osunlp/Mind2Web" in msg


# -- Online-Mind2Web and local tables -------------------------------------------------


def test_online_mind2web_format() -> None:
    tasks = load_tasks("online_mind2web", str(FIXTURES / "online_mind2web.json"))
    assert [t.task_id for t in tasks] == [f"om2w-{k:02d}" for k in range(9)]
    first = tasks[0]
    assert first.website == "skyhop.example"  # the URL's host, without www.
    assert first.start_url == "https://www.skyhop.example/"
    assert first.domain is None and first.subdomain is None  # not invented
    assert (first.reference_length, first.level, first.n_steps) == (3, "easy", 0)
    assert Counter(t.level for t in tasks) == {"easy": 3, "medium": 3, "hard": 3}


def test_online_mind2web_cannot_be_stratified_by_domain() -> None:
    tasks = load_tasks("online_mind2web", str(FIXTURES / "online_mind2web.json"))
    with pytest.raises(ValueError, match="'domain' is empty for 9 of 9 tasks .*website, level"):
        stratified_sample(tasks, 3, ["domain", "level"], seed=1)
    sample, allocation = stratified_sample(tasks, 3, ["website", "level"], seed=1)
    assert len(sample) == 3 and allocation["sampled"].sum() == 3


CSV_COLUMNS = {
    "task_id": "id",
    "confirmed_task": "question",
    "website": "site",
    "domain": "area",
    "subdomain": "section",
    "reference_steps": "steps",
    "level": "difficulty",
}


def test_csv_with_a_column_mapping() -> None:
    tasks = load_tasks("file", str(FIXTURES / "local_tasks.csv"), columns=CSV_COLUMNS)
    by_id = {t.task_id: t for t in tasks}
    assert list(by_id) == ["csv-1", "csv-2", "csv-3", "csv-4"]
    assert by_id["csv-2"].reference_steps[0] == "[textbox] City -> TYPE: Austin"
    assert (by_id["csv-1"].level, by_id["csv-3"].level) == ("easy", "hard")
    assert (by_id["csv-4"].domain, by_id["csv-4"].subdomain) == ("Travel", "Car rental")


def test_jsonl_in_mind2web_names_needs_no_mapping() -> None:
    tasks = load_tasks("file", str(FIXTURES / "local_tasks.jsonl"))
    assert [(t.task_id, t.n_steps, t.level) for t in tasks] == [
        ("jl-1", 2, "easy"),
        ("jl-2", 5, "medium"),
    ]


def test_json_and_parquet_load_the_same_tasks(tmp_path: Path) -> None:
    from_json = load_tasks("file", str(FIXTURES / TRAIN_FILES[1]))
    frame = pl.DataFrame(fixture_records(TRAIN_FILES[1])).drop("actions")
    frame.write_parquet(tmp_path / "tasks.parquet")
    from_parquet = load_tasks("file", str(tmp_path / "tasks.parquet"))
    assert from_parquet == from_json and len(from_json) == 10
    # a file without a telling suffix needs tasks.format
    shutil.copy(tmp_path / "tasks.parquet", tmp_path / "tasks.data")
    with pytest.raises(TaskLoadError, match="set tasks.format"):
        load_tasks("file", str(tmp_path / "tasks.data"))
    assert load_tasks("file", str(tmp_path / "tasks.data"), format="parquet") == from_json


def test_a_mapped_column_the_file_lacks_is_named() -> None:
    columns = {**CSV_COLUMNS, "task_id": "identifier"}
    with pytest.raises(TaskLoadError, match=r"tasks.columns.task_id names column 'identifier'"):
        load_tasks("file", str(FIXTURES / "local_tasks.csv"), columns=columns)


def test_a_required_field_no_column_gives_is_named() -> None:
    # the CSV's columns are not in our names: without the mapping there is no task id
    with pytest.raises(TaskLoadError, match=r"local_tasks.csv:row 2: no value for task_id"):
        load_tasks("file", str(FIXTURES / "local_tasks.csv"))


def test_bad_cells_are_named_with_their_row(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("task_id,confirmed_task,website,reference_steps\nx,Do it,site,not a list\n")
    with pytest.raises(TaskLoadError, match=r"bad.csv:row 2: column 'reference_steps'"):
        load_tasks("file", str(bad))
    nolevel = tmp_path / "nolevel.jsonl"
    nolevel.write_text('{"task_id": "y", "confirmed_task": "Do it", "website": "site"}\n')
    with pytest.raises(TaskLoadError, match="(?s)nolevel.jsonl:1: .*cannot tell difficulty"):
        load_tasks("file", str(nolevel))


def test_duplicate_task_ids_across_a_file_are_an_error(tmp_path: Path) -> None:
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(fixture_records(TRAIN_FILES[1])[:2] * 2))
    with pytest.raises(TaskLoadError, match="duplicate task_id"):
        load_tasks("file", str(dup))


def test_task_frames_round_trip_the_new_fields() -> None:
    tasks = load_tasks("online_mind2web", str(FIXTURES / "online_mind2web.json"))
    assert tasks_from_frame(tasks_to_frame(tasks)) == tasks


# -- stratified sampling on Mind2Web ----------------------------------------------------


def mind2web_fixture_tasks() -> list:
    return load_tasks("file", str(FIXTURES / TRAIN_FILES[0])) + load_tasks(
        "file", str(FIXTURES / TRAIN_FILES[1])
    )


def test_every_stratum_that_fits_is_represented_and_the_rest_is_proportional() -> None:
    tasks = mind2web_fixture_tasks()
    strata = ["domain", "subdomain", "level"]
    sample, allocation = stratified_sample(tasks, 20, strata, seed=20260504, min_per_stratum=None)
    populations = Counter((t.domain, t.subdomain, t.level) for t in tasks)
    assert allocation.height == len(populations) == 15
    assert (allocation["minimum"] == 1).all() and (allocation["sampled"] >= 1).all()
    # 15 units of minimums, the other 5 by largest remainder over the strata whose quota
    # 20 * N_h / 30 exceeds 1: the three strata of 3 tasks (quota 2.0) get 2 each...
    three = allocation.filter(pl.col("population") == 3)
    assert three.height == 3 and (three["sampled"] == 2).all()
    assert allocation["sampled"].sum() == 20 == len(sample)
    counts = Counter((t.domain, t.subdomain, t.level) for t in sample)
    for row in allocation.iter_rows(named=True):
        assert counts[(row["domain"], row["subdomain"], row["level"])] == row["sampled"]


def test_with_more_strata_than_the_sample_pure_proportional_allocation_applies() -> None:
    tasks = mind2web_fixture_tasks()
    _, allocation = stratified_sample(
        tasks, 10, ["domain", "subdomain", "level"], 1, min_per_stratum=None
    )
    assert (allocation["minimum"] == 0).all()
    # Hamilton: floor(10 * N_h / 30) first, then the largest remainders
    assert allocation["sampled"].sum() == 10
    for row in allocation.iter_rows(named=True):
        assert abs(row["sampled"] - row["quota"]) < 1


def test_the_sample_is_seed_stable_and_input_order_free() -> None:
    tasks = mind2web_fixture_tasks()
    strata = ["domain", "subdomain", "level"]
    a, _ = stratified_sample(tasks, 20, strata, seed=20260504, min_per_stratum=None)
    b, _ = stratified_sample(list(reversed(tasks)), 20, strata, seed=20260504, min_per_stratum=None)
    c, _ = stratified_sample(tasks, 20, strata, seed=7, min_per_stratum=None)
    assert [t.task_id for t in a] == [t.task_id for t in b]
    assert [t.task_id for t in a] != [t.task_id for t in c]


def test_stratifying_by_website_works_too() -> None:
    tasks = mind2web_fixture_tasks()
    _, allocation = stratified_sample(tasks, 12, ["website", "level"], seed=3, min_per_stratum=None)
    assert set(allocation["website"]) == {t.website for t in tasks}


# -- reference-guided judging ---------------------------------------------------------


RUN = {
    "status": "ok",
    "error_class": None,
    "error_message": None,
    "node_outputs": [],
    "tool_calls": [],
    "final_answer": "Done.",
}


def test_the_judge_sees_reference_steps_only_when_switched_on() -> None:
    task = tasks_to_frame(load_tasks("file", str(FIXTURES / "local_tasks.jsonl"))).row(
        0, named=True
    )
    guided = build_messages(RUN, task, "rubric")[1]["content"]
    assert "[textbox] Where -> TYPE: Boston" in guided
    blind = build_messages(RUN, task, "rubric", reference_guided=False)[1]["content"]
    assert "Where -> TYPE" not in blind and "Find a hotel in Boston" in blind


def test_the_judge_gets_the_reference_length_when_a_source_has_no_steps() -> None:
    tasks = load_tasks("online_mind2web", str(FIXTURES / "online_mind2web.json"))
    task = tasks_to_frame(tasks[-1:]).row(0, named=True)
    text = build_messages(RUN, task, "rubric")[1]["content"]
    assert "A person needed 12 steps" in text
    assert "Website: bigmart.example\n" in text  # no "(None / None)"


# -- config ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ({"source": "file"}, "tasks.path: required when tasks.source is file"),
        ({"source": "file", "path": "no/such.csv"}, "tasks.path: file not found"),
        ({"source": "mind2web", "path": "x.json"}, "tasks.path: only for tasks.source"),
        (
            {"source": "sandbox", "columns": {"task_id": "id"}},
            "tasks.columns: only for tasks.source file",
        ),
        ({"source": "mind2web", "splits": ["dev"]}, "tasks.splits.0"),
        (
            {
                "source": "file",
                "path": "tests/fixtures/tasks/local_tasks.csv",
                "columns": {"taskid": "id"},
            },
            "tasks.columns",
        ),  # fmt: skip
        ({"source": "mind2web", "hub": {"repo": "x"}}, "tasks.hub"),
    ],
)
def test_bad_task_config_is_named_before_anything_runs(
    base_config: dict, tasks: dict, message: str
) -> None:
    from mastif.core.config import ConfigError
    from mastif.execution.experiment import parse_config

    base_config["tasks"] = {**base_config["tasks"], **tasks}
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config(base_config, base_dir=REPO)


def test_a_shard_written_before_the_import_columns_still_gathers(tmp_path: Path) -> None:
    """Shards of an interrupted run from before the schema grew are read with defaults."""
    import pyarrow.parquet as pq

    from mastif.core.trace import RUN_SCHEMA, RunTrace, gather_runs, runs_to_table

    run = RunTrace(
        run_id="r1", experiment="e", model="m", protocol="standard", framework="langgraph",
        task_id="t", task_text="x", website="w", domain=None, level="easy", status="ok",
        error_class=None, error_message=None, final_answer="a",
    )  # fmt: skip
    old = runs_to_table([run]).drop_columns(["origin", "tokens_estimated", "import_meta"])
    pq.write_table(old, tmp_path / "old.parquet")
    table = gather_runs([str(tmp_path / "old.parquet")])
    assert table.schema == RUN_SCHEMA
    row = table.to_pylist()[0]
    assert (row["origin"], row["tokens_estimated"], row["import_meta"]) == ("run", False, None)


def test_the_judge_is_not_told_an_unrecorded_tool_outcome_failed() -> None:
    task = tasks_to_frame(load_tasks("file", str(FIXTURES / "local_tasks.jsonl"))).row(
        0, named=True
    )
    call = {"name": "web_search", "arguments": "{}", "ok": None, "output": "", "error": None}
    text = build_messages({**RUN, "tool_calls": [call]}, task, "rubric")[1]["content"]
    assert "web_search({}) outcome not recorded" in text and "failed" not in text
