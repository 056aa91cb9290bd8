"""components/provenance.py: the machine and commit recorded beside every measurement."""
import os

from actorq.components import provenance


def test_machine_info_names_the_cpu_kind_that_seeded_values_depend_on():
  info = provenance.machine_info()
  assert info["nproc"] == os.cpu_count() and isinstance(info["avx512"], bool)
  family, model = info["cpu_family_model"].split("/")
  assert family and model  # "?" where /proc/cpuinfo lacks them, never empty


def test_machine_line_is_cores_and_cpu_model():
  info = dict(provenance.machine_info(), nproc=2, cpu_model="AMD EPYC 7B13")
  assert provenance.machine_line(info) == "2-core AMD EPYC 7B13"
  assert provenance.machine_line().startswith(f"{os.cpu_count()}-core ")
  assert provenance.cpu_line(dict(info, cpu_family_model="25/1")) == (
      "AMD EPYC 7B13 (family 25, model 1), 2 cores")


def test_commit_is_a_short_hash_of_this_checkout():
  value = provenance.commit()
  assert value == "unknown" or (4 <= len(value) <= 40 and int(value, 16) >= 0)
