"""docs/results/index.md has exactly one row per results folder under docs/results/."""
import pathlib
import re

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "results"
COLUMNS = ["results", "claim", "headline figure", "command", "commit", "date", "machine"]
# A row's first cell: [`folder/`](folder/page.md)
_FIRST_CELL = re.compile(r"^\[`([A-Za-z0-9_.-]+)/`\]\(([^)]+)\)$")


def _rows(text):
  """The index table's rows as lists of cells (header and separator dropped)."""
  lines = [line for line in text.splitlines() if line.startswith("|")]
  header = [cell.strip() for cell in lines[0].strip("|").split("|")]
  assert header == COLUMNS, header
  return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[2:]]


def folders_and_rows(results=RESULTS):
  """(the folders under `results`, {folder named by a row: the row's cells})."""
  folders = {p.name for p in results.iterdir() if p.is_dir()}
  rows = {}
  for cells in _rows((results / "index.md").read_text(encoding="utf-8")):
    match = _FIRST_CELL.match(cells[0])
    assert match, f"first cell is not [`folder/`](folder/page): {cells[0]!r}"
    assert match.group(1) not in rows, f"two rows name {match.group(1)}"
    rows[match.group(1)] = cells
  return folders, rows


def test_every_results_folder_has_one_row_and_every_row_a_folder():
  folders, rows = folders_and_rows()
  assert len(folders) >= 35  # the move put every results folder here
  assert sorted(folders - set(rows)) == [], "results folders without a row in docs/results/index.md"
  assert sorted(set(rows) - folders) == [], "rows naming a folder that does not exist"


def test_every_row_is_complete_and_links_into_its_folder():
  _, rows = folders_and_rows()
  for folder, cells in rows.items():
    assert len(cells) == len(COLUMNS), (folder, cells)
    assert all(cells), f"{folder}: an empty cell (write 'not recorded' where a field is not)"
    target = _FIRST_CELL.match(cells[0]).group(2)
    assert target.startswith(folder + "/"), (folder, target)
    assert (RESULTS / target).is_file(), f"{folder}: the row links {target}, which does not exist"


def test_the_check_fails_on_a_missing_row_and_on_a_row_without_folder(tmp_path):
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
  row = "| [`{0}/`]({0}/table.md) | c | h | x | not recorded | 2026-12-01 | m |\n"
  (tmp_path / "index.md").write_text(head + row.format("a") + row.format("gone"))
  folders, rows = folders_and_rows(tmp_path)
  assert folders - set(rows) == {"b"}
  assert set(rows) - folders == {"gone"}
