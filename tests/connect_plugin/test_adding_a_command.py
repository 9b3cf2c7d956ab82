"""docs/adding-a-command.md ("# Adding a SQL command"): the page's rule and contract class, and nothing
else, make a command the client parses and builds. Its keyword terminals, the ``?command`` alternation,
its head for "did you mean" and ``COMMAND_START`` come from the rule; the statement builder makes the
contract command from the rule's name; the contract's options carry it to the executor and back."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from lark import Lark
from lark.exceptions import UnexpectedInput

from connect_plugin import grammar
from connect_plugin.statements import OnTable, build_statement
from indextables_contract import commands as C
from tests.test_readme import runnable_blocks

STATEMENT = "describe indextables split files '/t' LIMIT 3"


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the page's runnable block defines (``RULE``, ``DescribeSplitFiles``), run as written."""
    (code,) = runnable_blocks("docs/adding-a-command.md", "# Adding a SQL command")
    module = types.ModuleType("adding_a_command")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # a dataclass looks its module up
    exec(compile(code, "docs/adding-a-command.md", "exec"), module.__dict__)
    return module.__dict__


def parser_with(rule: str) -> Lark:
    return Lark(grammar.grammar_of(grammar.COMMAND_RULES + rule + "\n", grammar.PART_RULES), start="start",
                parser="earley", ambiguity="resolve", propagate_positions=True)  # fmt: skip


def test_the_grammar_is_derived_from_its_rules() -> None:
    assert grammar.grammar_of(grammar.COMMAND_RULES, grammar.PART_RULES) == grammar.GRAMMAR
    assert "_SPLIT:" not in grammar.GRAMMAR and "_FILES:" not in grammar.GRAMMAR  # the page's words are new
    with pytest.raises(UnexpectedInput):
        grammar.STATEMENT_PARSER.parse(STATEMENT)


def test_the_pages_rule_and_class_are_a_command(page: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    cls = page["DescribeSplitFiles"]
    parser = parser_with(page["RULE"])
    heads = grammar.command_heads(parser)
    assert ("DESCRIBE", "INDEXTABLES", "SPLIT", "FILES") in heads
    assert set(heads) - {("DESCRIBE", "INDEXTABLES", "SPLIT", "FILES")} == set(grammar.COMMAND_HEADS)
    assert grammar.command_start(heads).match(STATEMENT)

    tree = parser.parse(STATEMENT)
    assert tree.data == "describe_split_files"
    monkeypatch.setitem(C.COMMANDS, cls.NAME, cls)  # what the class's place in commands.py does
    statement = build_statement(tree, STATEMENT, lambda target: "/t")
    assert statement == OnTable("/t", cls(limit=3))
    assert C.decode_command(statement.command.to_options()) == cls(limit=3)

    assert build_statement(parser.parse("DESCRIBE INDEXTABLES SPLIT FILES '/t'"), "", lambda t: "/t") == OnTable(
        "/t", cls()
    )


def test_contract_commands_are_every_command_class_of_the_module() -> None:
    classes = {c for c in vars(C).values() if isinstance(c, type) and issubclass(c, C.Command) and c is not C.Command}
    assert set(C.COMMANDS.values()) == classes
    assert all(C.COMMANDS[c.NAME] is c for c in classes)
    assert set(C.TABLELESS) == {c for c in classes if not c.TABLE}
    assert C.FlushCache in C.TABLELESS and C.History not in C.TABLELESS
