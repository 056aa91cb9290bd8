"""An agent is one import away (issue 38): each agent package re-exports its config,
builder, networks and learner, as Acme's do (`from actorq.agents import sac;
sac.SACConfig, sac.SACBuilder, sac.make_networks`)."""
import importlib
import types

import pytest

from actorq.agents import sac
from actorq.agents import registry

FAMILIES = ("dpg_common", "onpolicy_common")
MODULES = ("config", "networks", "learning", "builder")


def _exports(package):
  """The package's public names that are not its submodules."""
  return {n: v for n, v in vars(package).items()
          if not n.startswith("_") and not isinstance(v, types.ModuleType)}


@pytest.mark.parametrize("agent", registry.names())
def test_the_package_exports_the_registered_config_and_builder(agent):
  config_cls, builder_cls = registry.get(agent)
  package = importlib.import_module(f"actorq.agents.{agent}")
  assert getattr(package, config_cls.__name__) is config_cls
  assert getattr(package, builder_cls.__name__) is builder_cls
  networks = importlib.import_module(f"actorq.agents.{agent}.networks")
  assert package.make_networks is networks.make_networks
  # The learner class: the agent's own, or its family's (DPGLearner, OnPolicyLearner).
  learners = [n for n in _exports(package) if n.endswith("Learner")]
  assert len(learners) == 1, learners
  owners = [importlib.import_module(f"actorq.agents.{agent}.learning")]
  owners += [importlib.import_module(f"actorq.agents.{f}.learning") for f in FAMILIES]
  assert any(getattr(m, learners[0], None) is getattr(package, learners[0]) for m in owners)


@pytest.mark.parametrize("package_name", list(registry.names()) + list(FAMILIES))
def test_every_export_is_the_object_its_module_defines(package_name):
  package = importlib.import_module(f"actorq.agents.{package_name}")
  exports = _exports(package)
  assert len(exports) >= 4
  owners = [importlib.import_module(f"actorq.agents.{package_name}.{m}") for m in MODULES]
  owners += [importlib.import_module(f"actorq.agents.{f}.learning") for f in FAMILIES]
  for name, value in exports.items():
    assert any(getattr(m, name, None) is value for m in owners), name


def test_the_documented_example():
  config = sac.SACConfig(batch_size=32)
  builder = sac.SACBuilder(config)
  assert builder.config is config and config.samples_per_insert == 256.0
  assert sac.make_networks is importlib.import_module("actorq.agents.sac.networks").make_networks
