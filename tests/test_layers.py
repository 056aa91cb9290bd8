"""The package's floors (ARCHITECTURE): imports flow one way,

    cli -> benchmarks -> studies -> launch (and testing) -> agents -> components
        -> quantization -> core,

no function-local import of an actorq module exists (such an import is how a cycle
hides; a module-level ``if __name__ == "__main__":`` block, a script's entry point handing
over to cli/, is no import of the module), and argparse lives in `cli/` only (besides the
examples, which are command lines of their own). Read from the source with `ast`, so
it also holds for code no test imports."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = {"core": 0, "quantization": 1, "components": 2, "agents": 3, "launch": 4,
          "testing": 4, "studies": 5, "benchmarks": 6, "cli": 7, "examples": 8}
# Modules that sit on another floor than their folder: command-line scripts that use the
# CLI's argument types and commands (a benchmark's own `__main__`, the test driver of
# `actorq`), so they stand beside `cli/`.
# `components.atomic` (files written whole) needs only `core`, and quantization's policy files
# use it: it stands on quantization's floor.
MODULE_LAYERS = {"testing.cli": 7, "benchmarks.export_parity": 7, "benchmarks.hosts_train": 7,
                 "components.atomic": 1}
ALLOWED_LOCAL = set()
# Folders whose modules may build an argparse parser: cli/, and the examples (scripts
# with a `__main__` of their own, outside the package).
ARGPARSE_FOLDERS = {"cli", "examples"}


def _modules():
  for folder in LAYERS:
    path = os.path.join(ROOT, folder + ".py")
    if os.path.isfile(path):
      yield folder, path
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
      for name in files:
        if name.endswith(".py"):
          yield folder, os.path.join(dirpath, name)


def _is_main_block(node) -> bool:
  """A module-level ``if __name__ == "__main__":`` (a script's entry point)."""
  test = getattr(node, "test", None)
  return (isinstance(node, ast.If) and isinstance(test, ast.Compare)
          and isinstance(test.left, ast.Name) and test.left.id == "__name__"
          and any(isinstance(c, ast.Constant) and c.value == "__main__"
                  for c in test.comparators))


def _actorq_imports(tree):
  """(module imported, is top level) for every `actorq.*` import outside a module-level
  ``if __name__ == "__main__":`` block: that block is a script's entry point (a benchmark's
  or study's `__main__` hands over to its command line in cli/), never run on import, so
  it is no dependency of the module."""
  top = set(id(n) for n in tree.body)
  entry = set(id(n) for block in tree.body if _is_main_block(block) for n in ast.walk(block))
  for node in ast.walk(tree):
    if id(node) in entry:
      continue
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module == "actorq":
      names = [f"actorq.{a.name}" for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      names = [node.module]
    for name in names:
      if name == "actorq" or name.startswith("actorq."):
        yield name, id(node) in top


def _layer(module: str):
  parts = module.split(".")
  if len(parts) < 2:
    return None
  for depth in range(len(parts), 1, -1):
    name = ".".join(parts[1:depth])
    if name in MODULE_LAYERS:
      return MODULE_LAYERS[name]
  return LAYERS.get(parts[1])


def _own_layer(folder: str, path: str) -> int:
  rel = os.path.relpath(path, ROOT)[:-len(".py")].replace(os.sep, ".")
  return MODULE_LAYERS.get(rel, LAYERS[folder])


@pytest.mark.parametrize("folder,path", list(_modules()),
                         ids=lambda v: os.path.relpath(v, ROOT) if os.sep in str(v) else v)
def test_imports_flow_down_and_none_is_function_local(folder, path):
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  rel = os.path.relpath(path, ROOT)
  for module, top_level in _actorq_imports(tree):
    layer = _layer(module)
    assert layer is None or layer <= _own_layer(folder, path), f"{rel} imports {module} (upward)"
    if not top_level:
      assert (rel, module) in ALLOWED_LOCAL, f"{rel}: function-local import of {module}"


def test_the_layers_are_all_there():
  assert sum(1 for _ in _modules()) > 50


@pytest.mark.parametrize("folder,path", list(_modules()),
                         ids=lambda v: os.path.relpath(v, ROOT) if os.sep in str(v) else v)
def test_argparse_lives_in_cli(folder, path):
  if folder in ARGPARSE_FOLDERS:
    return
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      assert all(a.name != "argparse" for a in node.names), f"{path} imports argparse"
    if isinstance(node, ast.ImportFrom):
      assert node.module != "argparse", f"{path} imports from argparse"


def test_the_floors_have_their_rooms():
  for folder in ("cli", "studies", "components/acting", "components/replay", "components/envs"):
    assert os.path.isfile(os.path.join(ROOT, folder, "__init__.py")), folder
