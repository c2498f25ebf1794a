"""tools/mutation's own operators: a bug in them would under-report silently.

Each operator is run on a small module written for the test, and the mutants it makes are
compared with the ones a reader expects: their operators, their keys, and the source each
one produces.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from typing import Any

import pytest
from stdio_process import ROOT


def _load() -> Any:
    path = ROOT / "tools" / "mutation"
    loader = importlib.machinery.SourceFileLoader("rypsok_mutation_tool", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses looks the module up by name while the module runs.
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


TOOL = _load()


def _mutants(source: str) -> list[Any]:
    return list(TOOL._Collector("sample", source).collect())


def _by_operator(source: str) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for mutant in _mutants(source):
        found.setdefault(mutant.operator, []).append((mutant.original, mutant.replacement))
    return found


def _applied(source: str, operator: str) -> list[str]:
    return [TOOL.mutated_source(source, m) for m in _mutants(source) if m.operator == operator]


def test_req_test_019_every_comparison_is_turned_round() -> None:
    source = "def f(a, b):\n    return a < b\n"
    assert ("a < b", "a <= b") in _by_operator(source)["compare"]
    assert _applied(source, "compare") == ["def f(a, b):\n    return a <= b\n"]


@pytest.mark.parametrize(
    ("operator", "swapped"),
    [
        ("<=", "<"),
        (">", ">="),
        (">=", ">"),
        ("==", "!="),
        ("!=", "=="),
        ("in", "not in"),
        ("not in", "in"),
        ("is", "is not"),
        ("is not", "is"),
    ],
)
def test_req_test_019_each_comparison_swap(operator: str, swapped: str) -> None:
    source = f"def f(a, b):\n    return a {operator} b\n"
    assert _by_operator(source)["compare"] == [(f"a {operator} b", f"a {swapped} b")]


def test_req_test_019_boolean_arithmetic_and_unary_mutants() -> None:
    found = _by_operator("def f(a, b):\n    return (a and b) + (not a) - 2 * b\n")
    assert found["boolean"] == [("a and b", "a or b")]
    assert found["unary-drop"] == [("not a", "a")]
    assert sorted(found["arithmetic"]) == [
        ("(a and b) + (not a)", "(a and b) - (not a)"),
        ("(a and b) + (not a) - 2 * b", "(a and b) + (not a) + 2 * b"),
        ("2 * b", "2 // b"),
    ]
    assert sorted(found["number"]) == [("2", "1"), ("2", "3")]


def test_req_test_019_statements_returns_and_constants() -> None:
    source = "def f(a):\n    x = 3\n    if a:\n        return 'yes'\n    return True\n"
    found = _by_operator(source)
    assert ("3", "4") in found["number"] or ("3", "2") in found["number"]
    assert ("True", "False") in found["constant"]
    assert "return-none" in found
    assert "statement-drop" in found


def test_req_test_019_a_table_loses_each_entry_once() -> None:
    source = "T = frozenset({'a', 'b', 'c'})\n"
    drops = [m for m in _mutants(source) if m.operator == "entry-drop"]
    assert sorted(m.original for m in drops) == ["'a'", "'b'", "'c'"]
    for mutant in drops:
        mutated = TOOL.mutated_source(source, mutant)
        assert mutant.original not in mutated
        assert mutated.count("'") == 4  # two entries left


def test_req_test_019_docstrings_messages_imports_and_annotations_are_not_mutated() -> None:
    source = (
        '"""Doc."""\nimport re\nfrom typing import Final\nX: Final[int] = 1\n'
        "def f(a: int) -> str:\n    '''Doc.'''\n    return f'value {a} here'\n"
        "__all__ = ['f', 'X']\n"
    )
    originals = {m.original for m in _mutants(source)}
    assert "Doc." not in originals
    assert "value " not in originals
    assert "'f'" not in originals
    assert not any("Final" in o or o == "int" for o in originals)


def test_req_test_019_a_regex_loses_each_branch_and_class_item() -> None:
    source = "import re\nR = re.compile(r'ab|cd|[xyz]')\n"
    found = _by_operator(source)
    # Each branch goes with one separator next to it, so the rest stays a valid pattern.
    assert sorted(o for o, _ in found["regex-branch"]) == ["ab|", "|[xyz]", "|cd"]
    dropped = [m for op, _, _, m in TOOL._regex_mutations("ab|cd|[xyz]") if op == "regex-branch"]
    assert sorted(dropped) == sorted(["cd|[xyz]", "ab|[xyz]", "ab|cd"])
    assert sorted(o for o, _ in found["regex-class-item"]) == ["x", "y", "z"]


def test_req_test_019_a_regex_range_end_moves_both_ways_but_not_in_alphabet_idioms() -> None:
    mutations = list(TOOL._regex_mutations("[b-f0-9]"))
    moved = sorted(new for op, _, new, _ in mutations if op == "regex-range-end")
    assert moved == ["b-e", "c-f"]
    assert not [m for m in mutations if m[0] == "regex-range-end" and m[1] == "0-9"]


def test_req_test_019_a_regex_quantifier_moves_each_bound() -> None:
    mutations = {
        new for op, _, new, _ in TOOL._regex_mutations("a{2,4}") if op == "regex-quantifier"
    }
    assert mutations == {"{3,4}", "{1,4}", "{2,3}", "{2,5}"}
    exact = {new for op, _, new, _ in TOOL._regex_mutations("a{3}") if op == "regex-quantifier"}
    assert exact == {"{2}", "{4}"}


def test_req_test_019_a_lookaround_is_dropped_whole() -> None:
    mutations = [
        (o, m) for op, o, _, m in TOOL._regex_mutations("(?<!x)ab(?=c)") if op == "regex-lookaround"
    ]
    assert sorted(mutations) == [("(?<!x)", "ab(?=c)"), ("(?=c)", "(?<!x)ab")]


def test_req_test_019_under_ignorecase_one_of_a_z_and_A_Z_is_redundant() -> None:
    plain = [o for op, o, _, _ in TOOL._regex_mutations("[A-Za-z_]") if op == "regex-class-item"]
    icase = [
        o for op, o, _, _ in TOOL._regex_mutations("[A-Za-z_]", True) if op == "regex-class-item"
    ]
    assert plain == ["A-Z", "a-z", "_"]
    assert icase == ["_"]


def test_req_test_019_a_compiler_function_marks_its_argument_as_a_regex() -> None:
    source = "import re\ndef _rx(text):\n    return re.compile(text)\nR = _rx('ab|cd')\n"
    assert "regex-branch" in _by_operator(source)


@pytest.mark.parametrize(
    ("text", "code"), [("a", 97), ("\\-", 45), ("\\x41", 65), ("\\u00e9", 233), ("\\d", None)]
)
def test_req_test_019_class_characters_are_read_with_their_escapes(
    text: str, code: int | None
) -> None:
    assert TOOL._class_char(text) == code


def test_req_test_019_keys_do_not_depend_on_line_numbers_and_count_repeats() -> None:
    first = _mutants("def f(a):\n    return a < 1 or a < 1\n")
    moved = _mutants("\n\n\ndef f(a):\n    return a < 1 or a < 1\n")
    assert [m.key for m in first] == [m.key for m in moved]
    repeated = [m.key for m in first if m.operator == "compare"]
    assert len(set(repeated)) == len(repeated)
    assert any(key.endswith(" #2") for key in repeated)


def test_req_test_019_every_mutant_changes_the_source() -> None:
    source = (
        "import re\nT = ('a', 'b')\nR = re.compile(r'x|[a-c]{1,3}')\n"
        "def f(a, b):\n    if a in T and b > 2:\n        return a + b\n    for x in b:\n"
        "        continue\n    return None\n"
    )
    unchanged = TOOL.unchanged_source(source)
    for mutant in _mutants(source):
        assert TOOL.mutated_source(source, mutant) != unchanged, mutant.key
