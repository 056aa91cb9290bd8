"""The package's layers (ARCHITECTURE): imports flow one way,

    benchmarks -> launch (and testing) -> agents -> components -> quantization -> core,

and no function-local import of an actorq module exists (such an import is how a cycle
hides). Read from the source with `ast`, so it also holds for code no test imports."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = {"core": 0, "quantization": 1, "components": 2, "agents": 3, "launch": 4,
          "testing": 4, "benchmarks": 5, "examples": 6}
# `python -m actorq.launch.cli` runs the module as __main__ and calls the imported copy.
ALLOWED_LOCAL = {("launch/cli.py", "actorq.launch")}


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
  return LAYERS.get(parts[1]) if len(parts) > 1 else None


@pytest.mark.parametrize("folder,path", list(_modules()),
                         ids=lambda v: os.path.relpath(v, ROOT) if os.sep in str(v) else v)
def test_imports_flow_down_and_none_is_function_local(folder, path):
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  rel = os.path.relpath(path, ROOT)
  for module, top_level in _actorq_imports(tree):
    layer = _layer(module)
    assert layer is None or layer <= LAYERS[folder], f"{rel} imports {module} (upward)"
    if not top_level:
      assert (rel, module) in ALLOWED_LOCAL, f"{rel}: function-local import of {module}"


def test_the_layers_are_all_there():
  assert sum(1 for _ in _modules()) > 50
