"""`cli/precision_arg`: `precision_items`: `actorq sweep --precisions` with uniform
precisions, per-layer policy files and ``mixed:<choice>,...`` names."""
import pytest

from actorq.cli import main as cli
from actorq.cli import precision_arg
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
    ("fp32,int3", "allowed precisions are fp32, fp16, bf16, int8, litert-fp32, a precision policy file"),
    ("fp32;int3", "allowed precisions are fp32, fp16, bf16, int8"),
    ("int8;int8", "repeats a precision"),
    (f"{NAME};{NAME}", "repeats a precision"),
    (";", "no precisions"),
    ("fp32;mixed:fp16,int9", "int9"),
    ("fp32;no_such_policy.json", "no_such_policy.json"),
    ("fp32;int4", "(int4 on every layer is the per-layer policy mixed:int4,int4,...: one "
                  "label per parameter layer"),
])
def test_bad_items_are_refused_with_what_is_allowed(text, fragment):
  with pytest.raises(cli.UsageError, match=None) as e:
    precision_arg.precision_items("--precisions", text)
  assert fragment in str(e.value) and str(e.value).startswith("--precisions")


@pytest.mark.parametrize("text,hint", [
    ("int4", "mixed:int4,int4,..."),
    ("int8+p0.5", "mixed:int8+p0.5,int8+p0.5,..."),
    ("int3/tensor", "mixed:int3/tensor,int3/tensor,..."),
    ("int16", None),
    ("fp64", None),
])
def test_a_layer_choice_as_actor_precision_is_refused_with_its_mixed_form(text, hint):
  with pytest.raises(cli.UsageError) as e:
    precision_arg.actor_precision("--actor-precision", text)
  message = str(e.value)
  assert message.startswith(f"--actor-precision {text!r} not allowed; allowed: fp32")
  assert len(message.splitlines()) == 1
  if hint is None:
    assert "on every layer" not in message
  else:
    assert hint in message
