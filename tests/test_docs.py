"""The docs: a README a newcomer reads in two minutes, one method file per page (shown by the page's
"How measured" expander), links that resolve, and no method text in two places."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
METHODS = DOCS / "methods"
PAGES = sorted((ROOT / "pages").glob("*.py"))
PAGES = [p for p in PAGES if p.name != "__init__.py"]
MIN_PARAGRAPH = 80


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _how_measured_calls(page: Path) -> list[list[str]]:
    """The string arguments of every ``how_measured(...)`` call in a page script."""
    calls = []
    for node in ast.walk(ast.parse(page.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "how_measured":
            calls.append([a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)])
    return calls


def _squash(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(md: str) -> list[str]:
    """Paragraphs and list items of a Markdown file, whitespace squashed; code blocks left out."""
    md = re.sub(r"```.*?```", "", md, flags=re.S)
    blocks = re.split(r"\n\s*\n|\n(?=- )", md)
    out = []
    for block in blocks:
        lines = [line for line in block.splitlines() if not line.startswith(("    ", "#"))]
        text = _squash(" ".join(lines)).removeprefix("- ")
        if len(text) >= MIN_PARAGRAPH:
            out.append(text)
    return out


def _python_strings(path: Path) -> str:
    """Every string literal of a Python file (implicit concatenations joined), whitespace squashed."""
    tree = ast.parse(path.read_text())
    parts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for node in ast.walk(tree):  # f-strings: their literal pieces
        if isinstance(node, ast.JoinedStr):
            parts.append("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return "\n".join(_squash(p) for p in parts)


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail to docs/"
    assert lines[0].startswith("# ")
    assert lines[2] == "```bash"
    assert lines[3].startswith("bash scripts/install.sh && python3 -m streamlit run app.py ")
    assert lines[4].startswith("bash scripts/install.sh --test && python3 -m pytest ")
    assert lines[5] == "```"
    # CI runs exactly the README's test command.
    ci = (ROOT / ".ci" / "run").read_text()
    assert lines[4].split("#")[0].strip() in ci


def test_every_page_renders_its_method_file():
    for page in PAGES:
        calls = _how_measured_calls(page)
        assert len(calls) == 1, f"{page.name} must call how_measured once, not {len(calls)} times"
        names = calls[0]
        assert names and names[0] == page.stem, f"{page.name}: how_measured({names}) must name the page first"
        for name in names:
            assert (METHODS / f"{name}.md").is_file(), f"{page.name}: docs/methods/{name}.md is missing"


def test_every_method_file_is_shown_by_a_page():
    shown = {name for page in PAGES for call in _how_measured_calls(page) for name in call}
    files = {p.stem for p in METHODS.glob("*.md")}
    assert files, "no docs/methods/*.md"
    assert files <= shown, f"method files no page shows: {sorted(files - shown)}"


def test_method_files_are_plain_markdown_the_page_can_render():
    for path in METHODS.glob("*.md"):
        text = path.read_text()
        assert text.startswith("# "), f"{path.name}: starts with its title"
        assert not re.search(r"<[a-zA-Z/][^>]*>", re.sub(r"`[^`]*`", "", text)), f"{path.name}: HTML"
        assert not re.search(r"\]\((?!https?://)[^)]*\)", text), f"{path.name}: a relative link the page can't follow"


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = target.split("#")[0]
        assert (path.parent / file).exists(), f"{path.relative_to(ROOT)} links to {target}, which does not exist"


def test_no_method_text_in_two_places():
    others = {p: _squash(p.read_text()) for p in _markdown_files()}
    code = {p: _python_strings(p) for p in sorted((ROOT / "pages").rglob("*.py"))}
    for method in sorted(METHODS.glob("*.md")):
        for paragraph in _paragraphs(method.read_text()):
            for path, text in {**others, **code}.items():
                if path == method:
                    continue
                assert paragraph not in text, (
                    f"docs/methods/{method.name} and {path.relative_to(ROOT)} both say: {paragraph[:100]}…"
                )


def test_the_paragraph_check_sees_method_text_in_python_strings(tmp_path):
    """The check above would catch the old way: method text as a string constant in a page."""
    paragraph = _paragraphs((METHODS / "matmul.md").read_text())[0]
    page = tmp_path / "page.py"
    words = paragraph.split(" ")
    half = len(words) // 2
    page.write_text(f"TEXT = (\n    {' '.join(words[:half])!r}\n    {' ' + ' '.join(words[half:])!r}\n)\n")
    assert paragraph in _python_strings(page)


def test_how_measured_shows_the_files_without_their_titles():
    from streamlit.testing.v1 import AppTest

    def page():
        from pages.common.methods import how_measured

        how_measured("step_bench", "all_gpus")

    at = AppTest.from_function(page).run()
    assert not at.exception
    (expander,) = at.expander
    assert expander.label == "How measured"
    shown = [m.value for m in expander.markdown]
    assert len(shown) == 2
    for text, name in zip(shown, ("step_bench", "all_gpus"), strict=True):
        body = (METHODS / f"{name}.md").read_text().partition("\n")[2].strip()
        assert text == body and not text.startswith("# ")


def test_the_architecture_s_worked_example_runs_as_pasted(tmp_path):
    """docs/ARCHITECTURE.md's "add an experiment" module, pasted as it stands, imports on a box without torch (the
    registry imports every experiment module for every command) and its config refuses what it says it refuses."""
    import subprocess
    import sys
    import textwrap

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("1. **`core/experiments/memcpy.py`**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "memcpy_example.py").write_text(textwrap.dedent(block))
    probe = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # any import of torch fails, as on a box without it
        import memcpy_example
        from core.errors import ConfigError
        (exp,) = memcpy_example.EXPERIMENTS
        assert exp.name == "memcpy" and exp.config_type().sizes_mib == (1, 64, 1024)
        try:
            exp.config_type(sizes_mib=(0,))
        except ConfigError as exc:
            print("refused:", exc)
        """
    )
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused: sizes_mib: give at least one size of 1 MiB or more"
