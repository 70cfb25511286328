"""The benchmark scripts keep running (their figures are read, never asserted)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pegboard.sandbox import detect

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

#: Every script in benchmarks/, found by listing the folder: none can rot unrun.
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("bench_*.py"))

#: bench_sandbox.py and bench_confined.py time bubblewrap: where none works they exit 1,
#: saying why.
WITHOUT_SANDBOX = detect("required").reason
needs_sandbox = pytest.mark.skipif(
    WITHOUT_SANDBOX is not None, reason=f"no sandbox here: {WITHOUT_SANDBOX}"
)


#: The scripts that need the sandbox.
SANDBOXED = {"bench_sandbox.py", "bench_confined.py"}


def with_marks(scripts: list[str]) -> list[Any]:
    return [
        pytest.param(script, marks=needs_sandbox) if script in SANDBOXED else script
        for script in scripts
    ]


#: Extra arguments a script needs for a brief run. bench_targets.py runs the
#: others again: here one cheap part; test_bench_targets_quick_run_* runs them all.
ARGUMENTS = {
    "bench_builtin.py": ["--rounds", "1"],
    "bench_targets.py": ["--only", "construction"],
}

#: The scripts that hold a performance target, with what a quick run of their
#: targets needs, as bench_targets.py runs them.
TARGET_RUNS = {
    "bench_calls.py": ["--only", "calls"],
    "bench_construction.py": [],
    "bench_scale.py": [],
    "bench_storage.py": [],
    "bench_startup.py": [],
    "bench_builtin.py": ["--only", "read", "--rounds", "1"],
    "bench_sandbox.py": [],
    "bench_confined.py": [],
    "bench_journal.py": [],
}

#: The keys of each target in a script's --json output.
KEYS = {"quantity", "figure", "unit", "quietest", "limit", "met", "command"}

#: The performance targets, by a piece of their row's quantity, and their limits.
LIMITS = {
    "openai-agents FunctionTool.on_invoke_tool": 0.8,
    "MCPServer.call_tool, untyped dict return": 0.4,
    "a 10 KB text result - a short text result": 3.6,
    "the same classes each time / MCP add_tool": 0.5,
    "close n registrations of one name, oldest first": 2.0,
    "register one tool then prepare(), n times": 2.0,
    "prepare() after one change,": 10.0,
    "execute() / Path.write_text": 2.0,
    "all at once / one after another": 1.0,
    "in another Location's area / empty storage": 1.5,
    "read of a page at 90%": 1.5,
    "`pegboard --help` / `python -c pass`": 3.0,
    "`pegboard tools` / `python -c pass`": 6.0,
    "`pegboard tools` / the floor": 1.3,
    "bash `true`, sandbox='required' / sandbox='off'": 2.0,
    "add, confined - add, confine='off', per call": 150.0,
    "add, confined / add via `pegboard serve` and the mcp mount": 0.3,
    "open 10 plugins, confined - open 10 plugins, confine='off'": 1500.0,
    "add, journaled - unjournaled, per call": 2.0,
    "add, replayed / executed through the journal": 1.0,
    "add via execute_tool / a bare activity, per call": 1.3,
}


def run(script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
    )


def check_targets(path: Path) -> list[dict[str, Any]]:
    """The targets a script wrote: a non-empty list of objects with exactly the keys."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(rows, list)
    assert rows, f"{path} lists no targets"
    for row in rows:
        assert KEYS == set(row), row
        assert isinstance(row["quantity"], str)
        assert row["quantity"]
        assert isinstance(row["figure"], int | float)
        assert row["unit"] in {"x", "µs", "ms"}
        assert row["quietest"] is None or isinstance(row["quietest"], int | float)
        assert row["limit"] is None or isinstance(row["limit"], int | float)
        # A verdict exactly when there is a limit to judge against.
        assert (row["limit"] is None) == (row["met"] is None), row
        assert row["met"] is None or isinstance(row["met"], bool)
        assert row["command"].startswith("benchmarks/bench_")
        assert "--json" not in row["command"]
    return rows


@pytest.fixture
def bench_targets(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench_targets.py imported as a module, its sibling modules on the path."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_targets")


def test_every_benchmark_is_listed() -> None:
    """The folder listing finds the scripts (a moved folder would run nothing)."""
    assert {"bench_calls.py", "bench_construction.py", "bench_scale.py"} <= set(SCRIPTS)
    assert set(TARGET_RUNS) <= set(SCRIPTS)


@pytest.mark.parametrize("script", with_marks(SCRIPTS))
def test_benchmark_runs_in_quick_mode(script: str) -> None:
    """A quick run exits cleanly and prints its report under Markdown headings."""
    result = run(script, "--quick", *ARGUMENTS.get(script, []))
    assert 0 == result.returncode, result.stderr
    assert "## " in result.stdout


@pytest.mark.parametrize("script", with_marks(sorted(TARGET_RUNS)))
def test_benchmark_writes_its_targets_as_json(script: str, tmp_path: Path) -> None:
    """--json writes a non-empty list of targets, each with every key, and quotes the command."""
    path = tmp_path / "targets.json"
    result = run(script, "--quick", *TARGET_RUNS[script], "--json", str(path))
    assert 0 == result.returncode, result.stderr
    rows = check_targets(path)
    command = " ".join([f"benchmarks/{script}", "--quick", *TARGET_RUNS[script]])
    assert {command} == {row["command"] for row in rows}
    assert any(row["limit"] is not None for row in rows), "no row holds a target"


@pytest.mark.timeout(600)
@needs_sandbox
def test_bench_targets_quick_run_has_a_row_per_target(tmp_path: Path) -> None:
    """The whole quick run: each part's JSON parses and each of its targets is a table row."""
    result = run("bench_targets.py", "--quick", "--keep", str(tmp_path))
    assert 0 == result.returncode, result.stderr
    names = (
        "calls",
        "construction",
        "scale",
        "bounding",
        "storage",
        "read",
        "startup",
        "sandbox",
        "confined",
        "journal",
    )
    rows = [row for name in names for row in check_targets(tmp_path / f"{name}.json")]
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    for row in rows:
        (line,) = [line for line in table if line.startswith(f"| {row['quantity']} |")]
        assert f"`{row['command']}`" in line
    # Two tables, each a header and a rule: seven machine facts, then one line per target.
    assert 2 + 7 + 2 + len(rows) == len(table)
    for piece, limit in LIMITS.items():
        assert [limit] == [row["limit"] for row in rows if piece in row["quantity"]], piece
    (opening,) = [row for row in rows if "plugins=[]" in row["quantity"]]
    assert opening["limit"] is not None
    assert "targets met" in result.stdout
    assert "load average (1 / 5 / 15 min) after" in result.stdout


def fake(folder: Path, name: str, body: str) -> None:
    (folder / name).write_text(textwrap.dedent(body), encoding="utf-8")


WRITES_A_TARGET = """
    import json, sys
    path = sys.argv[sys.argv.index("--json") + 1]
    command = " ".join(["benchmarks/bench_fake.py", *sys.argv[1:sys.argv.index("--json")]])
    row = {"quantity": "a fake quantity", "figure": 2.0, "unit": "x", "quietest": None,
           "limit": 1.0, "met": False, "command": command}
    open(path, "w").write(json.dumps([row]))
"""


def test_bench_targets_reports_a_missed_target_and_exits_0(
    bench_targets: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target not met is reported, not raised: the run still exits 0."""
    fake(tmp_path, "bench_fake.py", WRITES_A_TARGET)
    parts = [bench_targets.Part("fake", "bench_fake.py")]
    assert 0 == bench_targets.main([], parts, tmp_path)
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("| a fake quantity |")]
    assert "**not met**" in line
    assert "0 of 1 targets met" in out


def test_bench_targets_passes_quick_and_the_arguments_a_script_needs(
    bench_targets: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--quick reaches each script with its own extra arguments; a full run gets the others."""
    fake(tmp_path, "bench_fake.py", WRITES_A_TARGET)
    part = bench_targets.Part(
        "fake", "bench_fake.py", ("--only", "x"), quick=("--rounds", "1"), full=("--rounds", "9")
    )
    assert 0 == bench_targets.main(["--quick"], [part], tmp_path)
    assert "`benchmarks/bench_fake.py --only x --quick --rounds 1`" in capsys.readouterr().out
    assert 0 == bench_targets.main([], [part], tmp_path)
    assert "`benchmarks/bench_fake.py --only x --rounds 9`" in capsys.readouterr().out


def test_bench_targets_only_runs_one_part(
    bench_targets: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--only NAME runs that part alone; the other script would fail if it ran."""
    fake(tmp_path, "bench_fake.py", WRITES_A_TARGET)
    fake(tmp_path, "bench_broken.py", "raise SystemExit(3)\n")
    parts = [
        bench_targets.Part("broken", "bench_broken.py"),
        bench_targets.Part("fake", "bench_fake.py"),
    ]
    assert 0 == bench_targets.main(["--only", "fake"], parts, tmp_path)
    assert "| a fake quantity |" in capsys.readouterr().out


def test_bench_targets_fails_with_the_script_and_its_error(
    bench_targets: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script that fails stops the run: exit 1, naming the script, its status and error."""
    fake(tmp_path, "bench_fake.py", WRITES_A_TARGET)
    fake(
        tmp_path,
        "bench_broken.py",
        'import sys\nprint("check_text() missing limits", file=sys.stderr)\nsys.exit(3)\n',
    )
    parts = [
        bench_targets.Part("broken", "bench_broken.py"),
        bench_targets.Part("fake", "bench_fake.py"),
    ]
    assert 1 == bench_targets.main(["--quick"], parts, tmp_path)
    captured = capsys.readouterr()
    assert "" == captured.out
    assert "bench_broken.py --quick failed with exit status 3" in captured.err
    assert "check_text() missing limits" in captured.err


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("pass\n", "cannot read the targets"),
        (
            "import sys\nopen(sys.argv[-1], 'w').write('[]')\n",
            "holds no targets",
        ),
        (
            'import sys\nopen(sys.argv[-1], "w").write(\'[{"quantity": "q", "figure": 1}]\')\n',
            "expected the keys",
        ),
    ],
)
def test_bench_targets_fails_on_a_script_without_readable_targets(
    bench_targets: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    body: str,
    reason: str,
) -> None:
    """A script that exits 0 but writes no targets, none, or malformed ones fails the run."""
    fake(tmp_path, "bench_empty.py", body)
    assert 1 == bench_targets.main([], [bench_targets.Part("empty", "bench_empty.py")], tmp_path)
    error = capsys.readouterr().err
    assert "bench_empty.py exited 0 but wrote no readable targets" in error
    assert reason in error


def test_targets_refuse_an_unknown_unit_and_a_wrong_type(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """load() checks each value, not only the keys."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    targets = importlib.import_module("_targets")
    row = {
        "quantity": "q",
        "figure": 1.0,
        "unit": "x",
        "quietest": None,
        "limit": None,
        "met": None,
        "command": "benchmarks/bench_x.py",
    }
    path = tmp_path / "targets.json"
    for bad in ({"unit": "s"}, {"figure": "fast"}, {"met": "yes"}):
        path.write_text(json.dumps([{**row, **bad}]), encoding="utf-8")
        with pytest.raises(ValueError, match="target 0"):
            targets.load(path)
    path.write_text(json.dumps([row]), encoding="utf-8")
    assert "q" == targets.load(path)[0].quantity


def test_targets_quote_the_command_without_the_json_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    targets = importlib.import_module("_targets")
    argv = ["/x/benchmarks/bench_calls.py", "--json", "out.json", "--only", "calls", "--json=a"]
    assert "benchmarks/bench_calls.py --only calls" == targets.command_line(argv)
