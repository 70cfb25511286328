"""Strict JSON at the boundaries."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pegboard import CodecError, FrozenDict, FrozenList, thaw
from pegboard._json import find_problem, format_path, freeze, loads


@pytest.mark.parametrize(
    ("value", "path", "rule"),
    [
        ({"a": [1, float("nan")]}, "$.a[1]", "number"),
        ({"a": {"b c": float("-inf")}}, '$.a["b c"]', "number"),
        ({1: "x"}, "$", "object"),
        ({"a": "\ud800"}, "$.a", "unicode"),
        ({"\ud800": 1}, "$", "unicode"),
        ({"a": {1, 2}}, "$.a", "type"),
        ({"a": b"bytes"}, "$.a", "type"),
    ],
)
def test_find_problem_names_the_path(value: Any, path: str, rule: str) -> None:
    """Values that are not plain JSON are reported with where and why."""
    problem = find_problem(value, max_depth=64)
    assert problem is not None
    assert (path, rule) == (problem.path, problem.rule)


def test_find_problem_accepts_plain_json() -> None:
    """Plain JSON, tuples included, passes."""
    assert find_problem({"a": [1, 2.5, True, None, "é", ("t",)]}, max_depth=64) is None


def test_depth_limit_is_exact() -> None:
    """Nesting up to the limit passes; one more level is refused."""
    assert find_problem([[[1]]], max_depth=3) is None
    problem = find_problem([[[[1]]]], max_depth=3)
    assert problem is not None
    assert "deeper than 3" in str(problem)


def test_loads_rejects_what_json_forbids() -> None:
    """NaN, Infinity, overflowing numbers and lone surrogates are not JSON."""
    for text in ('{"a": NaN}', '{"a": -Infinity}', '{"a": 1e400}', '{"a": "\\udc00"}'):
        with pytest.raises(CodecError) as caught:
            loads(text, max_depth=64)
        assert caught.value.path == "$.a"


def test_loads_reports_the_position_of_broken_text() -> None:
    """Broken JSON text names the line and column."""
    with pytest.raises(CodecError, match="line 2 column"):
        loads('{"a":\n ]', max_depth=64)


def test_loads_accepts_surrogate_pairs() -> None:
    """An escaped surrogate pair is one valid character."""
    assert loads('{"a": "\\ud83d\\ude00"}', max_depth=64) == {"a": "😀"}


def test_format_path_quotes_odd_keys() -> None:
    """Identifiers read as .name, anything else as a quoted key."""
    assert format_path((((None, "a"), 0), "x y")) == '$.a[0]["x y"]'


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(_json)
def test_freeze_then_thaw_round_trips(value: Any) -> None:
    """A frozen value equals its source, and thawing gives back plain containers."""
    frozen = freeze(value)
    assert value == frozen
    assert value == thaw(frozen)
    assert value == copy.deepcopy(frozen)
    assert value == pickle.loads(pickle.dumps(frozen))


def test_frozen_containers_refuse_every_mutation() -> None:
    """No mutating method of dict or list works on the frozen forms."""
    frozen = freeze({"a": [1]})
    assert isinstance(frozen, FrozenDict)
    assert isinstance(frozen["a"], FrozenList)
    for mutate in (
        lambda: frozen.__setitem__("b", 1),
        lambda: frozen.update(b=1),
        lambda: frozen.pop("a"),
        lambda: frozen.setdefault("b", 1),
        lambda: frozen.clear(),
        lambda: frozen["a"].append(2),
        lambda: frozen["a"].extend([2]),
        lambda: frozen["a"].__setitem__(0, 2),
        lambda: frozen["a"].sort(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    assert frozen == {"a": [1]}
