"""The README is a short guide whose quick start is two commands; the pages it points to exist,
their links resolve, and the figure catalogue in docs/figures.md is the figure files' own."""
import re

from experiments import figures
from tests.conftest import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
PAGES = sorted((PROJECT_ROOT / "docs").glob("*.md"))


def test_the_readme_is_a_guide_that_starts_with_a_two_command_quick_start():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    quick = text.split("## Quick start", 1)[1].split("```", 2)[1]
    assert [line for line in quick.splitlines() if line.strip()] == [
        "pip install -e . && pubsub-emu run experiments/scenarios/quickstart.yaml",
        "pip install -e '.[test]' && python3 -m pytest -q -n auto --dist loadgroup"]


def test_every_link_of_the_readme_and_the_docs_resolves():
    for page in [README, *PAGES]:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not target.startswith("http"):
                assert (page.parent / target).exists(), f"{page.name}: {target}"


def test_the_figure_catalogue_is_the_figure_files_own():
    text = (PROJECT_ROOT / "docs" / "figures.md").read_text()
    found = text[text.index(figures.CATALOGUE_START):text.index(figures.CATALOGUE_END) + len(figures.CATALOGUE_END)]
    assert found == figures.catalogue(), "docs/figures.md: regenerate with pubsub-emu figure --list --markdown"
