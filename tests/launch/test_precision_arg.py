"""`launch/precision_arg.precision_items`: `actorq sweep --precisions` with uniform
precisions, per-layer policy files and ``mixed:<choice>,...`` names."""
import pytest

from actorq.launch import cli
from actorq.launch import precision_arg
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns

NAME = "mixed:fp16,int8"
SPEC = ns.mlp(4, [16], 3)


def test_uniform_precisions_split_on_commas():
  assert precision_arg.precision_items("--precisions", "fp32,int8") == ("fp32", "int8")
  assert precision_arg.precision_items("--precisions", " fp16 , bf16 ") == ("fp16", "bf16")


def test_mixed_names_and_files_split_on_semicolons(tmp_path):
  path = tmp_path / "precision_policy.json"
  other = "mixed:int8,fp32"
  mixed.save(str(path), mixed.policy_of(other, SPEC), SPEC, search={"method": "by hand"})
  assert precision_arg.precision_items("--precisions", NAME) == (NAME,)
  assert precision_arg.precision_items("--precisions", str(path)) == (other,)
  assert precision_arg.precision_items("--precisions", f"fp32; {NAME} ;{path};") == (
      "fp32", NAME, other)  # a file is given back as its name; empty items are dropped


@pytest.mark.parametrize("text,fragment", [
    ("fp32,mixed:fp16,int8", "separate the precisions with ';'"),
    ("fp32,int3", "allowed precisions are fp32, fp16, bf16, int8, a precision policy file"),
    ("fp32;int3", "allowed precisions are fp32, fp16, bf16, int8"),
    ("int8;int8", "repeats a precision"),
    (f"{NAME};{NAME}", "repeats a precision"),
    (";", "no precisions"),
    ("fp32;mixed:fp16,int9", "int9"),
    ("fp32;no_such_policy.json", "no_such_policy.json"),
])
def test_bad_items_are_refused_with_what_is_allowed(text, fragment):
  with pytest.raises(cli.UsageError, match=None) as e:
    precision_arg.precision_items("--precisions", text)
  assert fragment in str(e.value) and str(e.value).startswith("--precisions")
