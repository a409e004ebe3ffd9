"""Type-mutated snapshots through ``check --replay`` and ``probe --replay``: a result or one line and exit 2.

Like the report fuzz (tests/test_fuzz.py) for the other input envcheck reads: a snapshot of the
committed corpus with one to three of its values (anywhere, at any depth) replaced by a value of
another type. Whatever the mutation, the command gives a result (exit 0 or 1, the checks' verdict)
or refuses the file in one line with exit 2; never a traceback (which a script would read as
"a check failed"). Fixed seed through the repo's hypothesis profile (tests/conftest.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis")  # a test extra

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from envcheck import cli, model  # noqa: E402

CORPUS = sorted((Path(__file__).parent / "fixtures" / "snapshots" / "corpus").glob("*.json"))
SNAPSHOTS = {p.name: json.loads(p.read_text()) for p in CORPUS}

leaf = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                 st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
other_type = st.one_of(leaf, st.lists(leaf, max_size=3), st.dictionaries(st.text(max_size=3), leaf, max_size=3),
                       st.recursive(leaf, lambda c: st.lists(c, max_size=2), max_leaves=4))


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``node`` a value sits, the top excluded."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            found += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += paths(v, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(SNAPSHOTS)))
    data = copy.deepcopy(SNAPSHOTS[name])
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(data)))
        node = data
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = draw(other_type)
    return name, data


@pytest.mark.parametrize("command", ["check", "probe"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(case=mutated(), fmt=st.sampled_from(["text", "json"]))
def test_a_mutated_snapshot_gives_a_result_or_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       command: str, case: tuple[str, dict[str, Any]],
                                                       fmt: str) -> None:
    name, data = case
    path = tmp_path / name
    path.write_text(json.dumps(data))
    rc = cli.main([command, "--replay", str(path), "--format", fmt])  # a crash raises here: the test fails
    out, err = capsys.readouterr()
    if rc == 2:
        [line] = err.strip().splitlines()
        assert str(path) in line and out == ""
        return
    assert rc in (0, 1) and (command == "check" or rc == 0)
    if fmt == "json":
        report = model.loads(out)  # what was written reads back as a report
        assert report.kind == command
