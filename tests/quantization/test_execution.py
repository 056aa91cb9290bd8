"""quantization/execution.py: which runtime executes a per-layer precision policy."""
import pytest

from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import execution as qx


def test_execution_for_per_layer_mixes():
  spec = ns.mlp(4, [8], 2)
  pol = lambda a, b: mixed.PrecisionPolicy((("dense_0", mixed.parse_choice(a)),
                                            ("dense_1", mixed.parse_choice(b))))
  assert qx.execution_for(pol("fp16", "fp16")) == "jax-fp16"
  assert qx.execution_for(pol("fp32", "fp32+p0.5")) == "jax-fp32"
  assert qx.execution_for(pol("int8", "int8/tensor+p0.9")) == "litert-int8"
  assert qx.execution_for(pol("fp32", "int8")) == "litert-mixed"
  assert qx.execution_for(pol("fp32", "int4")) == "simulated"
  assert qx.execution_for(pol("fp32", "int4"), "litert") == "litert-mixed"
  assert qx.execution_for(pol("int4", "int2"), "litert") == "litert-int8"
  with pytest.raises(ValueError, match="low_bit_runtime"):
    qx.execution_for(pol("int4", "int2"), "xla")
  assert spec.parameter_layers[0].name == "dense_0"
