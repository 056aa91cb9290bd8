"""The package's floors (ARCHITECTURE): imports flow one way,

    cli -> benchmarks -> studies -> launch (and testing) -> agents -> components
        -> quantization -> core,

no function-local import of an actorq module exists (such an import is how a cycle
hides), and argparse lives in `cli/` only (besides the `__main__` scripts of benchmarks
and examples, which are command lines of their own). Read from the source with `ast`, so
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
MODULE_LAYERS = {"testing.cli": 7, "benchmarks.export_parity": 7, "benchmarks.hosts_train": 7}
ALLOWED_LOCAL = set()
# Folders whose modules may build an argparse parser (other than cli/): scripts with a
# `__main__` of their own.
ARGPARSE_FOLDERS = {"cli", "benchmarks", "examples"}


def _modules():
  for folder in LAYERS:
    path = os.path.join(ROOT, folder + ".py")
    if os.path.isfile(path):
      yield folder, path
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
      for name in files:
        if name.endswith(".py"):
          yield folder, os.path.join(dirpath, name)


def _actorq_imports(tree):
  """(module imported, is top level) for every `actorq.*` import."""
  top = set(id(n) for n in tree.body)
  for node in ast.walk(tree):
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
