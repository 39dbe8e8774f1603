"""The README, read without a server: its Python blocks paste into ``python -m
asyncio``, and its walkthroughs say what a newcomer needs (the integration
suite runs the marked snippets against agentauth: tests/integration/test_readme.py)."""

from __future__ import annotations

import ast
import code
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import pytest

SDK = Path(__file__).resolve().parents[2]
README = (SDK / "README.md").read_text()
# Every ```python block, with the name of the marked ones (else its line).
BLOCK = re.compile(r"(?:<!-- sdk test (?:runs this|binds these): ([\w-]+) -->\n)?```python\n(.*?)```", re.S)


def python_blocks() -> list[tuple[str, str]]:
    out = []
    for m in BLOCK.finditer(README):
        name = m.group(1) or f"line {README.count(chr(10), 0, m.start()) + 1}"
        out.append((name, m.group(2)))
    return out


def marked(name: str) -> str:
    blocks = dict(python_blocks())
    assert name in blocks, f"README.md has no block marked {name!r}"
    return blocks[name]


def test_the_readme_has_its_runnable_blocks() -> None:
    names = {name for name, _ in python_blocks()}
    assert {"connect", "names", "token", "decorator", "tools", "adapters", "turns", "lifecycle", "webhook"} <= names


@pytest.mark.parametrize(("name", "block"), python_blocks(), ids=[n for n, _ in python_blocks()])
def test_no_block_has_a_blank_line_inside_an_indented_block(name: str, block: str) -> None:
    """The REPL of Python 3.10 to 3.12 (``python -m asyncio``) ends a block at a
    blank line: the indented line after it is an IndentationError."""
    lines = block.splitlines()
    for i, (line, after) in enumerate(itertools.pairwise(lines)):
        if not line.strip() and after[:1] in (" ", "\t"):
            pytest.fail(f"README.md[{name}] line {i + 2}: a blank line inside a block, before {after.strip()!r}")


class _CompileOnly(code.InteractiveConsole):
    """``python -m asyncio``'s console (top-level await), compiling what is
    pasted line by line as the classic REPL does, running nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.compile.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        self.failures: list[str] = []

    def runcode(self, code: Any) -> None:
        pass

    def showsyntaxerror(self, *args: Any, **kwargs: Any) -> None:
        err = sys.exc_info()[1]
        self.failures.append(f"{type(err).__name__}: {err}")


@pytest.mark.parametrize(("name", "block"), python_blocks(), ids=[n for n, _ in python_blocks()])
def test_each_block_pastes_into_the_asyncio_repl(name: str, block: str) -> None:
    console = _CompileOnly()
    for line in [*block.splitlines(), ""]:
        console.push(line)
    assert console.failures == [], f"README.md[{name}] pasted into python -m asyncio: {console.failures}"


def test_the_turns_snippet_waits_for_the_turn_of_its_own_post() -> None:
    assert "wait_for_turn(swarm, instance_key, posted.agent, event_id=posted.event_id)" in marked("turns")
    assert "aclosing(client.follow_turn(" in README, "the README shows how to leave a follow early"


def test_the_tools_snippet_searches_for_the_demos_skill_and_shows_what_it_finds() -> None:
    bundle = SDK.parents[1] / "examples" / "bundle"
    if not bundle.is_dir():
        pytest.skip("not in a checkout of agentauth (no examples/bundle)")
    skills: dict[str, str] = {}
    for path in sorted(bundle.glob("*.yaml")):
        for doc in path.read_text().split("\n---"):
            if re.search(r"^kind: Skill$", doc, re.M):
                name = re.search(r"^  name: (\S+)$", doc, re.M)
                assert name is not None, doc
                skills[name.group(1)] = doc
    assert skills, "make run's bundle has no skill"
    tools = marked("tools")
    m = re.search(r'search_skills\("([^"]+)".*\n.*# (\S+) ', tools)
    assert m is not None, "the tools snippet shows no skill search with its expected output"
    query, shown = m.groups()
    assert shown in skills, f"the comment shows {shown!r}, not one of make run's skills {sorted(skills)}"
    words = set(re.findall(r"[a-z0-9]+", skills[shown].lower()))
    assert set(re.findall(r"[a-z0-9]+", query.lower())) <= words, f"{query!r} does not find {shown}"


def test_the_tools_section_says_where_the_agent_jwt_comes_from_and_how_long_it_lasts() -> None:
    section = README[README.index("## Tools") : README.index("<!-- sdk test runs this: tools -->")]
    assert "export AGENTAUTH_AGENT_TOKEN=" in section
    assert "client-credentials" in section and "../../README.md#tools-and-skills-for-agents" in section
    assert "1 h" in section and "callable as `agent_token=`" in section
