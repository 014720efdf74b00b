"""The documentation: the site builds in strict mode, every page's Python runs as written, and no page speaks of
anything but tisim.

A page's ```python blocks run in order, in one namespace, as one script in a fresh process started from the repository
root. A block that is not meant to run (a fragment, a sketch needing a GPU) carries, on the line directly above its
fence, the marker <!-- not run: why -->; the reason is required.
"""
import html
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [p for p in (ROOT / "README.md", ROOT / "CHANGELOG.md") if p.exists()] + sorted(DOCS.rglob("*.md"))
PAGE_TIMEOUT = 300  # seconds for one page's blocks; the pages keep their examples small

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not run\b(?P<rest>.*?)-->\s*$")
# "#12" and "issue 12" as references to issues; "owner/repo#12", an upstream project's issue, is allowed
ISSUE = re.compile(r"(?<![\w&\]])(?<!\]\()#\d+\b|\bissues? #?\d+\b", re.I)
OUTSIDE_FILES = re.compile(r"design\.md|taichi-facts\.md", re.I)


def environment():
    """As tests/conftest.py sets it: no version check, the offline kernel cache inside the checkout, no display."""
    env = dict(os.environ)
    env.setdefault("TI_SKIP_VERSION_CHECK", "ON")
    env.setdefault("TI_OFFLINE_CACHE_FILE_PATH", str(ROOT / ".cache" / "taichi"))
    env["MPLBACKEND"] = "Agg"
    env["NO_MKDOCS_2_WARNING"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def python_blocks(text):
    """(script, blocks run, problems) of one page. The script holds the page's runnable Python at the page's own line
    numbers (every other line blank), so a traceback points at the page's line."""
    lines = text.splitlines()
    script = [""] * len(lines)
    problems, count, i = [], 0, 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            if NOT_RUN.match(lines[i]) and not (i + 1 < len(lines) and FENCE.match(lines[i + 1])):
                problems.append(f"line {i + 1}: a not-run marker must stand directly above a code fence")
            i += 1
            continue
        indent, ticks, lang = fence["indent"], fence["ticks"], fence["lang"].lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        marker = NOT_RUN.match(lines[i - 1]) if i else None
        if marker:
            reason = marker["rest"].strip()
            if not reason.startswith(":") or not reason[1:].strip():
                problems.append(f"line {i}: a not-run marker needs a reason: <!-- not run: why -->")
        if lang in ("python", "py") and not marker:
            for j in range(i + 1, end):
                line = lines[j]
                script[j] = line[len(indent):] if line.startswith(indent) else line.lstrip()
            count += 1
        i = end + 1
    return "\n".join(script) + "\n", count, problems


def page_id(page):
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_python_blocks_run(page, tmp_path):
    """Each page's Python blocks run, in order, in one namespace, as a user would paste them."""
    script, count, problems = python_blocks(page.read_text())
    assert not problems, f"{page_id(page)}: {problems}"
    if not count:
        return
    # a file, not python -c: Taichi reads the source of the kernels a page defines
    path = tmp_path / (re.sub(r"\W", "_", page_id(page)) + ".py")
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=environment(), capture_output=True, text=True,
                         timeout=PAGE_TIMEOUT)
    assert run.returncode == 0, (f"{page_id(page)}'s Python blocks failed (line numbers are the page's):\n"
                                 f"{run.stdout[-3000:]}\n{run.stderr[-6000:]}")


def test_block_extraction():
    """The extraction itself: blocks in order at their lines, markers honoured, a marker without reason refused."""
    page = "\n".join([
        "# Title", "```python", "a = 1", "```", "text", "<!-- not run: needs a GPU -->", "```python", "b = a", "```",
        "- item", "    ```python", "    c = a + 1", "    ```", "```bash", "ls", "```", "<!-- not run -->",
        "```python", "d = 4", "```", "<!-- not run: stray -->", "text"])
    script, count, problems = python_blocks(page)
    assert script.splitlines()[2] == "a = 1" and script.splitlines()[11] == "c = a + 1"
    assert "b = a" not in script and "ls" not in script and "d = 4" not in script
    assert count == 2
    assert len(problems) == 2 and "needs a reason" in problems[0] and "directly above" in problems[1]


def offences(text):
    return sorted({m.group(0) for m in ISSUE.finditer(text)} | {m.group(0) for m in OUTSIDE_FILES.finditer(text)})


def test_pages_speak_to_users_only():
    """No page refers to issue numbers or to files that are not in the repository."""
    found = {page_id(p): offences(p.read_text()) for p in PAGES}
    found = {page: words for page, words in found.items() if words}
    assert not found, f"issue numbers or outside files mentioned: {found}"


def test_offence_patterns():
    assert offences("fixed in #12; see issue 7 and design.md") == ["#12", "design.md", "issue 7"]
    assert not offences("[a](#12-steps) taichi-dev/taichi#8454 &#123; # 12 steps x[#]")


def test_readme_links_point_at_files_that_exist():
    """README.md is read on its own (outside the site): its relative links and pictures must resolve from the root."""
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    broken = [t for t in targets if not re.match(r"[a-z]+:|#", t) and not (ROOT / t.split("#")[0]).exists()]
    assert targets and not broken, f"README.md links to missing files: {broken}"


MKDOCS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
MISSING = [name for name in MKDOCS if importlib.util.find_spec(name.split(".")[0]) is None
           or importlib.util.find_spec(name) is None]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built as `make docs` builds it: --strict, so any warning fails."""
    if MISSING:
        pytest.skip(f"the docs extra is not installed ({', '.join(MISSING)}): pip install -e '.[docs]'")
    folder = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(folder)], cwd=ROOT,
                         env=environment(), capture_output=True, text=True, timeout=600)
    return folder, run


def test_site_builds_in_strict_mode(site):
    folder, run = site
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    for page in ("index.html", "reference/api/index.html", "reference/systems/index.html",
                 "reference/glossary/index.html", "changelog/index.html"):
        assert (folder / page).exists(), page


def text_of(page):
    """The visible text of a built page."""
    source = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", page.read_text())
    return html.unescape(re.sub(r"<[^>]+>", " ", source))


def test_built_pages_are_complete_and_speak_to_users_only(site):
    """The generated parts are there (every system, every name; the API reference of the public surface), and
    nothing the docstrings or the generated tables bring in mentions issues or outside files."""
    import tisim

    folder, run = site
    assert run.returncode == 0, "the build failed (see test_site_builds_in_strict_mode)"
    systems = text_of(folder / "reference/systems/index.html")
    glossary = text_of(folder / "reference/glossary/index.html")
    api = (folder / "reference/api/index.html").read_text()
    assert "<!-- generated" not in systems + glossary
    for name in tisim.systems.__all__:
        system = getattr(tisim.systems, name)
        assert f"tisim.systems.{name}" in systems
        assert f'id="tisim.systems.{name}"' in api, f"the API reference lacks tisim.systems.{name}"
        for q in system.PARAMS + system.STATE + system.ACTION:
            assert q.name in systems and q.name in glossary
    for anchor in ("tisim.System", "tisim.init", "tisim.gradcheck", "tisim.jvp", "tisim.core.losses.Tracking",
                   "tisim.optim.minimize", "tisim.optim.tasks.identify", "tisim.learn.pytorch.rollout_loss",
                   "tisim.optim.sweep.run", "tisim.viz.save_gif", "tisim.autodiff.diagnostics.health"):
        assert f'id="{anchor}"' in api, f"the API reference lacks {anchor}"
    found = {}
    for page in folder.rglob("*.html"):
        words = sorted({m.group(0) for m in OUTSIDE_FILES.finditer(text_of(page))})
        if words:
            found[str(page.relative_to(folder))] = words
    assert not found, f"the built site mentions files outside the repository: {found}"
