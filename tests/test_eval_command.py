"""`judge-mcp eval` as CI uses it: the real console script, started from /, the real OpenAI SDK talking to the
loopback fake model server, a dataset of 24 items; and its assertion language, unit by unit."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judges.errors import InputError
from server.eval import EXAMPLE_LINE, judge_failures, load_suite, parse_assertion
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import JUDGE_MCP, server_env

GOOD, WRONG, GARBLED = 19, 4, 1  # the failing dataset's items: each kind's count


def reply(rec: Recorded) -> Scripted:
    """The judge's reply: 5 (total 100) for a right answer, 1 (total 0) for a wrong one, prose it cannot read."""
    text = rec.text()
    if "garbled" in text:
        return Scripted(text="I think it is quite good overall.")
    return Scripted(text='{"reasoning": "checked", "score": 1}' if "Lyon" in text else
                    '{"reasoning": "checked", "score": 5}')


def dataset(path: Path, good: int, wrong: int = 0, garbled: int = 0) -> Path:
    lines = [{"id": f"good-{i}", "text": f"Paris, answer {i}.", "expect": {"total": 100}} for i in range(good)]
    lines += [{"id": f"wrong-{i}", "text": f"Lyon, answer {i}.", "expect": {"total": 100}} for i in range(wrong)]
    lines += [{"id": f"garbled-{i}", "text": f"garbled answer {i}.", "expect": {"total": 100}} for i in range(garbled)]
    for line in lines:
        line.update(instruction="What is the capital of France?", rubric="correctness")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def env_for(home: Path, fake: FakeModelServer, **extra: str) -> dict[str, str]:
    return server_env(home, JUDGE_MCP_MODEL="openai:gpt-4o-mini", OPENAI_API_KEY="sk-test",
                      OPENAI_BASE_URL=fake.openai_url, **extra)


def judge_eval(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([JUDGE_MCP, "eval", *map(str, args)], env=env, cwd="/", capture_output=True, text=True,
                          timeout=300)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory, fake_server_session: FakeModelServer) -> Iterator[Any]:
    """One run of 24 right answers, then the same command again; the fake server's request counts after each."""
    fake = fake_server_session
    fake.reset()
    fake.respond_with(reply)
    home = tmp_path_factory.mktemp("eval") / "home"
    data = dataset(home / "answers.jsonl", 24)
    env = env_for(home, fake)
    first = judge_eval(env, "score_text", data, "--json", home / "first.json", "--junit", home / "first.xml")
    after_first = len(fake.requests)
    again = judge_eval(env, "score_text", data, "--json", home / "again.json")
    yield home, first, after_first, again, len(fake.requests)
    fake.reset()


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory, fake_server_session: FakeModelServer) -> Iterator[Any]:
    """One run of 19 right answers, 4 wrong ones and 1 the judge's reply cannot be read for."""
    fake = fake_server_session
    fake.reset()
    fake.respond_with(reply)
    home = tmp_path_factory.mktemp("eval") / "home"
    data = dataset(home / "answers.jsonl", GOOD, WRONG, GARBLED)
    done = judge_eval(env_for(home, fake), "score_text", data, "--json", home / "report.json",
                      "--junit", home / "report.xml", "--html", home / "report.html")
    yield home, done, data
    fake.reset()


@pytest.mark.e2e
def test_a_run_whose_items_all_meet_their_expectations_exits_0(passing: Any) -> None:
    _, first, _, _, _ = passing
    assert first.returncode == 0, first.stderr
    assert last_line(first).startswith("judge-mcp eval: passed: 24 of 24 items passed (100.0%, at least 100.0% "
                                       "needed); 0 failed, 0 errors; 24 model requests, $0.")


@pytest.mark.e2e
def test_the_json_report_has_each_item_and_the_summary(passing: Any) -> None:
    home, _, after_first, _, _ = passing
    report = json.loads((home / "first.json").read_text())
    assert (report["tool"], report["dataset"]) == ("score_text", str(home / "answers.jsonl"))
    assert [i["id"] for i in report["items"]] == [f"good-{i}" for i in range(24)]
    first = report["items"][0]
    assert (first["index"], first["is_error"], first["error"], first["passed"], first["cached"]) == \
        (1, False, None, True, False)
    assert first["arguments"] == {"text": "Paris, answer 0.", "instruction": "What is the capital of France?",
                                  "rubric": "correctness"}
    assert first["assertions"] == [{"name": "total == 100", "passed": True, "expected": 100, "actual": 100.0}]
    assert first["result"]["total"] == 100.0 and first["cost_usd"] == first["result"]["usage"]["cost_usd"] > 0
    summary = report["summary"]
    assert {k: summary[k] for k in ("items", "passed", "failed", "errors", "pass_rate", "min_pass_rate", "ok",
                                    "model_requests")} == {
        "items": 24, "passed": 24, "failed": 0, "errors": 0, "pass_rate": 1.0, "min_pass_rate": 1.0, "ok": True,
        "model_requests": 24}
    assert summary["cost_usd"] == pytest.approx(sum(i["cost_usd"] for i in report["items"]))
    assert after_first == 24  # one model request an item, through the real SDK


@pytest.mark.e2e
def test_a_rerun_is_answered_from_the_result_cache_without_model_requests(passing: Any) -> None:
    home, _, after_first, again, after_again = passing
    assert again.returncode == 0, again.stderr
    assert after_again == after_first  # not one request more
    report = json.loads((home / "again.json").read_text())
    assert all(i["cached"] and i["cost_usd"] == 0 and i["passed"] for i in report["items"])
    assert (report["summary"]["model_requests"], report["summary"]["cost_usd"]) == (0, 0)
    assert last_line(again).endswith("; 0 model requests, $0.0000")


@pytest.mark.e2e
def test_without_a_terminal_each_item_is_one_plain_line(passing: Any) -> None:
    _, first, _, _, _ = passing
    lines = [line for line in first.stderr.splitlines() if line.startswith("judge-mcp eval: [")]
    assert sorted(int(line.split("[")[1].split("/")[0]) for line in lines) == list(range(1, 25))
    assert all(" passed (" in line and "/24] item " in line for line in lines)
    assert "\r" not in first.stderr


@pytest.mark.e2e
def test_a_run_with_failed_expectations_exits_1_naming_the_counts(failing: Any) -> None:
    _, done, _ = failing
    assert done.returncode == 1, done.stderr
    assert last_line(done).startswith(
        "judge-mcp eval: FAILED: 19 of 24 items passed (79.2%, at least 100.0% needed); 4 failed, 1 errors; ")


@pytest.mark.e2e
def test_a_call_with_no_usable_result_is_an_error_item_keeping_its_details(failing: Any) -> None:
    home, _, _ = failing
    report = json.loads((home / "report.json").read_text())
    (garbled,) = [i for i in report["items"] if i["is_error"]]
    assert garbled["id"] == "garbled-0" and garbled["passed"] is False
    assert garbled["error"] == "No usable result: no criterion was scored (1 failed). The details follow."
    assert garbled["result"]["criteria"][0]["failure"]["kind"] == "parse_error"
    assert (report["summary"]["passed"], report["summary"]["failed"], report["summary"]["errors"]) == (19, 4, 1)


@pytest.mark.e2e
def test_junit_xml_has_a_case_per_item_and_assertion_and_counts_the_failures(failing: Any) -> None:
    home, _, _ = failing
    root = ET.parse(home / "report.xml").getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("name") == "judge-mcp eval score_text answers.jsonl"
    cases = suite.findall("testcase")
    assert len(cases) == 48  # per item: the call, and its one expectation
    counted = {k: int(suite.get(k, "-1")) for k in ("tests", "failures", "errors", "skipped")}
    assert counted == {"tests": 48, "failures": WRONG, "errors": GARBLED, "skipped": GARBLED}
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("48", str(WRONG), str(GARBLED))
    # Jenkins' junit-10.xsd (which GitLab and the GitHub reporters also read): seconds as digits and a point.
    assert all(re.fullmatch(r"\d+\.\d{3}", e.get("time", "")) for e in (root, suite))
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("classname") for c in failed] == [f"score_text.item_{20 + i}_wrong-{i}" for i in range(WRONG)]
    assert {c.get("name") for c in failed} == {"total == 100"}
    assert failed[0].find("failure").get("message") == "expected 100, got 0.0"  # type: ignore[union-attr]
    (errored,) = [c for c in cases if c.find("error") is not None]
    assert (errored.get("classname"), errored.get("name")) == ("score_text.item_24_garbled-0", "call")
    assert all(c.get("name") and c.get("classname") and float(c.get("time", "x")) >= 0 for c in cases)


@pytest.mark.e2e
def test_the_html_report_drawn_by_chromium_shows_every_item_and_requests_nothing(failing: Any) -> None:
    import anyio

    from tests.chromium import Chromium

    home, _, _ = failing
    page = (home / "report.html").as_uri()
    browser = Chromium()
    try:
        visit = anyio.run(lambda: browser.visit(page))
    finally:
        browser.close()
    assert visit.text.startswith("judge-mcp eval · score_text\n")
    assert "RESULT\nfailed\nITEMS\n24\nPASSED\n19\nFAILED\n4\nERRORS\n1\nPASS RATE\n79.2% / 100.0%" in visit.text
    assert all(f"wrong-{i}" in visit.text for i in range(WRONG)) and "garbled-0" in visit.text
    assert visit.requests == [page]  # the page itself, nothing else
    assert len(visit.screenshot) > 10_000


@pytest.mark.e2e
def test_a_lower_min_pass_rate_passes_the_same_run(failing: Any, fake_server: FakeModelServer) -> None:
    home, _, data = failing
    fake_server.respond_with(reply)
    done = judge_eval(env_for(home, fake_server), "score_text", data, "--min-pass-rate", "0.75")
    assert done.returncode == 0, done.stderr
    assert last_line(done).startswith("judge-mcp eval: passed: 19 of 24 items passed (79.2%, at least 75.0% needed)")
    # Only the garbled item is asked again (a failure is never cached): its request and its repair round.
    assert [("garbled answer 0." in r.text()) for r in fake_server.requests] == [True, True]


@pytest.mark.e2e
def test_a_suite_adds_shared_arguments_and_assertions(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(reply)
    home = tmp_path / "home"
    lines = [{"id": f"q{i}", "text": "Lyon." if i == 0 else "Paris."} for i in range(20)]
    (home / "items.jsonl").parent.mkdir(parents=True)
    (home / "items.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (home / "suite.yaml").write_text("arguments:\n  instruction: What is the capital of France?\n"
                                     "  rubric: correctness\nassert:\n  - total >= 70\n  - no judge failures\n"
                                     "min_pass_rate: 0.95\n")
    done = judge_eval(env_for(home, fake_server), "score_text", home / "items.jsonl", "--suite", home / "suite.yaml",
                      "--json", home / "r.json")
    assert done.returncode == 0, done.stderr
    report = json.loads((home / "r.json").read_text())
    assert report["suite"] == str(home / "suite.yaml")
    assert report["items"][0]["arguments"] == {"instruction": "What is the capital of France?",
                                               "rubric": "correctness", "text": "Lyon."}
    assert report["items"][0]["assertions"] == [
        {"name": "total >= 70", "passed": False, "expected": ">= 70", "actual": 0.0},
        {"name": "no judge failures", "passed": True, "expected": "no judge failures", "actual": []}]
    assert (report["summary"]["passed"], report["summary"]["min_pass_rate"], report["summary"]["ok"]) == \
        (19, 0.95, True)


@pytest.mark.e2e
def test_the_demo_model_runs_pairwise_compare_with_no_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "pairs.jsonl").write_text("".join(json.dumps({
        "instruction": f"Where is station {i}?", "candidates": ["Two blocks north, by the bakery.", "north"]}) + "\n"
        for i in range(20)))
    (home / "suite.json").write_text(json.dumps({"assert": ["value in [Response A, Response B, Tie]",
                                                            "no judge failures"]}))
    done = judge_eval(server_env(home, JUDGE_MCP_MODEL="demo"), "pairwise_compare", home / "pairs.jsonl",
                      "--suite", home / "suite.json", "--json", "-")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # --json -: the report on stdout, the progress on stderr
    assert (report["summary"]["items"], report["summary"]["passed"], report["summary"]["cost_usd"]) == (20, 20, 0)
    assert {i["result"]["meta"]["orders"][0]["raw_responses"][0].count("[demo model]") for i in report["items"]} == {1}


@pytest.mark.e2e
def test_no_model_is_exit_2_saying_what_to_set(tmp_path: Path) -> None:
    data = dataset(tmp_path / "home" / "answers.jsonl", 20)
    done = judge_eval(server_env(tmp_path / "home"), "score_text", data)
    assert done.returncode == 2
    line = last_line(done)
    assert line.startswith("judge-mcp eval: no model: ") and "JUDGE_MCP_MODEL" in line
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.e2e
def test_a_bad_suite_is_exit_2_naming_the_closest_key(tmp_path: Path) -> None:
    data = dataset(tmp_path / "home" / "answers.jsonl", 20)
    (tmp_path / "home" / "suite.yaml").write_text("asserts:\n  - total >= 70\n")
    done = judge_eval(server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo"), "score_text", data,
                      "--suite", tmp_path / "home" / "suite.yaml")
    assert done.returncode == 2
    assert done.stderr == (f"judge-mcp eval: suite {tmp_path / 'home' / 'suite.yaml'}: unknown key 'asserts'; "
                           "did you mean 'assert'? valid: arguments, assert, min_pass_rate, description\n")


@pytest.mark.e2e
def test_a_misspelt_tool_is_exit_2_naming_the_closest_judging_tool(tmp_path: Path) -> None:
    data = dataset(tmp_path / "home" / "answers.jsonl", 20)
    done = judge_eval(server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo"), "scor_text", data)
    assert done.returncode == 2
    assert done.stderr.startswith("judge-mcp eval: 'scor_text' is not a judging tool; did you mean 'score_text'? ")


@pytest.mark.e2e
def test_a_dataset_line_that_is_not_json_is_exit_2_naming_the_line(tmp_path: Path) -> None:
    data = dataset(tmp_path / "home" / "answers.jsonl", 20)
    data.write_text(data.read_text() + "{not json\n")
    done = judge_eval(server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo"), "score_text", data)
    assert done.returncode == 2
    assert done.stderr.startswith(f"judge-mcp eval: dataset {data} line 21: ")
    assert "each line is one JSON object, e.g. {" in done.stderr


@pytest.mark.e2e
def test_ctrl_c_stops_the_run_at_once_with_one_line_and_no_report(tmp_path: Path,
                                                                   fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"score": 5}', delay_s=0 if len(fake_server.requests) <= 2
                                                  else 30))
    home = tmp_path / "home"
    data = dataset(home / "answers.jsonl", 24)
    proc = subprocess.Popen([JUDGE_MCP, "eval", "score_text", str(data), "--concurrency", "2", "--json",
                             str(home / "r.json")], env=env_for(home, fake_server), cwd="/",
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # an item answered: the run is under way, two more wait on the model
    while first and not first.startswith("judge-mcp eval: ["):  # a warning at start (no gate sandbox here)
        first = proc.stderr.readline()
    assert first.startswith("judge-mcp eval: [1/24] item "), first
    deadline = time.monotonic() + 30
    while len(fake_server.requests) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=10)
    rest = proc.stderr.read()
    assert code == 2, rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    assert rest.strip().splitlines()[-1] == (
        "judge-mcp eval: interrupted after 2 of 24 items; no report written; run the same command again to "
        "resume (answered items are read from the result cache)")
    assert not (home / "r.json").exists()


@pytest.mark.e2e
def test_on_a_terminal_the_progress_is_a_bar(tmp_path: Path) -> None:
    import pty

    home = tmp_path / "home"
    data = dataset(home / "answers.jsonl", 20)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([JUDGE_MCP, "eval", "score_text", str(data)], env=server_env(home, JUDGE_MCP_MODEL="demo"),
                            cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the process ended and closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    proc.wait(60)
    text = seen.decode()
    assert "judge-mcp eval: 100%" in text and "20/20" in text and "\r" in text
    assert "judge-mcp eval: [" not in text  # no plain lines on a terminal


# --- the assertion language, without a process ---------------------------------------------------------------------

RESULT = {"verdict": "revise", "total": 72.5, "meta": {"orders": [{"verdict": "Response A"}]},
          "tags": ["short", "clear"], "consistent": True}


@pytest.mark.parametrize(("written", "passed"), [
    ("total >= 70", True), ("total > 72.5", False), ("total < 80", True), ("total <= 72", False),
    ("verdict in [accept, revise]", True), ("verdict not in [accept, revise]", False),
    ("verdict == revise", True), ("verdict != revise", False), ("meta.orders.0.verdict == Response A", True),
    ("meta.orders.-1.verdict == 'Response B'", False), ("tags contains clear", True), ("verdict contains vis", True),
    ("consistent == true", True), ("consistent == 1", False), ("missing.path == 3", False),
])
def test_an_assertion_holds_exactly_when_its_comparison_does(written: str, passed: bool) -> None:
    assert parse_assertion(written, "test").check(RESULT, False)["passed"] is passed


def test_a_missing_field_is_said_in_the_actual_value() -> None:
    assert parse_assertion("score.total >= 1", "test").check(RESULT, False) == {
        "name": "score.total >= 1", "passed": False, "expected": ">= 1", "actual": "no field 'score.total' in the result"}


def test_no_judge_failures_lists_where_a_judge_failed() -> None:
    result = {"criteria": [{"name": "a", "failure": None}, {"name": "b", "failure": {"kind": "parse_error"}}],
              "failed": 1, "signals": {"test": {"failed": 3}}, "gates": [{"error": "ruff not found"}]}
    assert judge_failures(result) == ['criteria.1.failure: {"kind": "parse_error"}', "failed: 1"]


@pytest.mark.parametrize(("written", "said"), [
    ("total ~ 70", "write `PATH OP VALUE`"), ("verdict in accept", "`in` takes a list"),
    ("total >= high", "`>=` compares with a number"), (42, "an assertion is a text"),
])
def test_an_assertion_that_cannot_be_read_is_refused_saying_how_to_write_it(written: Any, said: str) -> None:
    with pytest.raises(InputError, match=said):
        parse_assertion(written, "suite s.yaml, assert[0]")


def test_a_suite_min_pass_rate_outside_0_to_1_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"min_pass_rate": 90}')
    with pytest.raises(InputError) as refused:
        load_suite(tmp_path / "s.json")
    assert str(refused.value) == f"suite {tmp_path / 's.json'}: min_pass_rate must be a number from 0 to 1, e.g. 0.9 (got 90)"


def test_a_yaml_alias_in_a_suite_is_refused_before_it_can_expand(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text('a: &a ["lol", "lol", "lol"]\nb: &b [*a, *a, *a]\narguments: {text: *b}\n')
    with pytest.raises(InputError) as refused:
        load_suite(tmp_path / "s.yaml")
    assert str(refused.value) == f"suite {tmp_path / 's.yaml'}: YAML aliases (*name) are not supported; write the value out"


@pytest.mark.parametrize("name, text", [("s.yaml", "assert: " + "[" * 5000 + "]" * 5000 + "\n"),
                                        ("s.json", '{"assert": ' + "[" * 5000 + "]" * 5000 + "}")])
def test_a_suite_nested_too_deep_is_refused_naming_the_limit(tmp_path: Path, name: str, text: str) -> None:
    # Before, a RecursionError's traceback (exit 1) instead of the one line and exit 2.
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as refused:
        load_suite(tmp_path / name)
    assert str(refused.value).startswith(f"suite {tmp_path / name}: nested more than 64 levels deep; ")


def test_a_lone_surrogate_escape_in_a_yaml_suite_is_refused_naming_where(tmp_path: Path) -> None:
    # Before, every item ran and then the reports could not be written (UnicodeEncodeError), all lost.
    (tmp_path / "s.yaml").write_text('arguments:\n  instruction: "q\\ud800"\n')
    with pytest.raises(InputError) as refused:
        load_suite(tmp_path / "s.yaml")
    assert str(refused.value) == (f"suite {tmp_path / 's.yaml'}.arguments.instruction: holds a lone UTF-16 surrogate "
                                  "escape (\\ud800 without its pair, after 'q'): it is no character and cannot be "
                                  "stored or sent; remove it, or write the character itself")


@pytest.mark.e2e
def test_a_lone_surrogate_escape_in_a_dataset_line_is_exit_2_naming_the_line(tmp_path: Path) -> None:
    # Before, the run judged the item and then failed writing its reports (UnicodeEncodeError), losing them.
    data = dataset(tmp_path / "home" / "answers.jsonl", 1)
    data.write_text(data.read_text() + '{"id": "x\\udfff", "text": "a", "instruction": "b"}\n')
    done = judge_eval(server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo"), "score_text", data,
                      "--json", tmp_path / "r.json")
    assert done.returncode == 2
    assert done.stderr == (f"judge-mcp eval: dataset {data} line 2.id: holds a lone UTF-16 surrogate escape "
                           "(\\udfff without its pair, after 'x'): it is no character and cannot be stored or sent; "
                           "remove it, or write the character itself; each line is one JSON object, e.g. "
                           + EXAMPLE_LINE + "\n")


def test_a_self_referring_assertion_value_is_refused() -> None:
    with pytest.raises(InputError, match=r"YAML aliases \(\*name\) are not supported"):
        parse_assertion("verdict in &a [*a]", "suite s.yaml, assert[0]")


def test_a_misspelt_field_is_answered_with_the_field_it_is_closest_to() -> None:
    assert parse_assertion("meta.ordres.0.verdict == Response A", "test").check(RESULT, False)["actual"] == (
        "no field 'meta.ordres.0.verdict' in the result; did you mean 'meta.orders.0.verdict'?")


def test_an_item_failed_on_a_misspelt_field_says_so_on_its_line(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"id": "s", "instruction": "Where?", "candidates": ["North.", "It is north."],
                                "expect": {"consistnt": True}}) + "\n")
    done = judge_eval(server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo"), "pairwise_compare", data)
    assert done.returncode == 1
    assert re.sub(r"\(\d+\.\d\d s\)", "(s)", done.stderr.splitlines()[0]) == (
        "judge-mcp eval: [1/1] item 1 (s) failed (s): consistnt == true (no field 'consistnt' in the result; did "
        "you mean 'consistent'?)")
