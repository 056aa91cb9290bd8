"""The documentation site builds with `mkdocs build --strict` (mkdocs.yml; docs/): a broken
link, a missing anchor or a page left out of the navigation fails the suite."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _build(project: pathlib.Path, site: pathlib.Path) -> subprocess.CompletedProcess:
  # NO_MKDOCS_2_WARNING: mkdocs-material's banner about MkDocs 2.0, noise in a failure's output.
  return subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
      cwd=project, capture_output=True, text=True, timeout=300, check=False,
      env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
  site = tmp_path_factory.mktemp("site")
  result = _build(ROOT, site)
  assert result.returncode == 0, result.stdout + result.stderr
  return site


def test_site_builds_strict_with_every_page(site):
  # The navigation's sections are all there, each a page that mkdocs rendered.
  for page in ("index.html", "getting-started/index.html", "concepts/index.html",
               "guides/compose-an-agent/index.html", "guides/multi-host/index.html",
               "agents/dqn/index.html", "results/index.html", "reference/cli/index.html"):
    assert (site / page).is_file(), page
  # The results index lists its folders, and a folder's own page is served with its files.
  results = (site / "results" / "index.html").read_text(encoding="utf-8")
  assert "dqn_cartpole_paired_10seeds/" in results
  assert (site / "results" / "dqn_cartpole_paired_10seeds" / "curves.png").is_file()
  assert (site / "results" / "bench" / "index.html").is_file()  # bench/README.md
  cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
  assert "usage: actorq train" in cli


def _copy_project(tmp_path: pathlib.Path) -> pathlib.Path:
  project = tmp_path / "project"
  project.mkdir()
  shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
  shutil.copytree(ROOT / "docs", project / "docs")
  return project


def test_strict_build_fails_on_a_broken_link_anchor_and_orphan_page(tmp_path):
  """One build of a copy with three faults: each is a warning, and strict mode fails on them."""
  project = _copy_project(tmp_path)
  docs = project / "docs"
  with open(docs / "concepts.md", "a", encoding="utf-8") as f:
    f.write("\nSee [this](missing-page.md) and [that](getting-started.md#no-such-section).\n")
  (docs / "guides" / "orphan.md").write_text("# Not in the nav\n", encoding="utf-8")
  result = _build(project, tmp_path / "site")
  output = result.stdout + result.stderr
  assert result.returncode == 1, output
  assert "Aborted with 3 warnings in strict mode" in output
  for named in ("'missing-page.md'", "#no-such-section", "guides/orphan.md"):
    assert named in output, named


def test_every_relative_link_of_the_readme_resolves():
  """README.md is outside the site (GitHub renders it); its links are checked here."""
  text = (ROOT / "README.md").read_text(encoding="utf-8")
  targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)
             if not t.startswith(("http://", "https://", "#"))]
  assert len(targets) >= 20  # the headline table's rows and the pages of "Where to go next"
  missing = [t for t in targets if not (ROOT / t).exists()]
  assert missing == []
