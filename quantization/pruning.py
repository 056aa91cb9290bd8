"""Magnitude pruning of a `{layer: {"w", "b"}}` tree (Zhu & Gupta 2017, "To prune,
or not to prune"): the weights with the smallest |w| are zeroed, layer-wise
(each layer reaches the target sparsity) or globally (one threshold over all
layers). Masks are float32 {0, 1} trees of the weights' shapes; call
`apply_masks` after every optimizer step (or on the updates) so pruned weights
stay zero through training. Biases are never pruned.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def _check_sparsity(sparsity: float) -> float:
  if not 0.0 <= float(sparsity) < 1.0:
    raise ValueError(f"sparsity={sparsity} not allowed; allowed: 0 <= sparsity < 1")
  return float(sparsity)


def _mask_for(w: np.ndarray, k: int) -> np.ndarray:
  """Mask keeping all but the k smallest-|w| entries (ties broken by index)."""
  flat = np.abs(np.asarray(w, np.float32)).reshape(-1)
  mask = np.ones(flat.shape, np.float32)
  if k > 0:
    mask[np.argsort(flat, kind="stable")[:k]] = 0.0
  return mask.reshape(np.shape(w))


def magnitude_masks(params, sparsity: float, scope: str = "layer",
                    skip=()) -> dict:
  """Masks `{layer: {"w": float32 {0,1}}}` reaching `sparsity` (fraction of zeros).

  Args:
    scope: "layer" (each layer pruned to `sparsity`) or "global" (one magnitude
      ranking over all weights of the non-skipped layers).
    skip: layer names left dense (mask of ones).
  """
  sparsity = _check_sparsity(sparsity)
  if scope not in ("layer", "global"):
    raise ValueError(f"scope={scope!r} not allowed; allowed: 'layer', 'global'")
  names = [n for n in params if n not in skip]
  masks = {n: {"w": np.ones(np.shape(params[n]["w"]), np.float32)} for n in params}
  if scope == "layer":
    for n in names:
      w = np.asarray(params[n]["w"])
      masks[n]["w"] = _mask_for(w, int(round(sparsity * w.size)))
  elif names:
    flat = np.concatenate([np.abs(np.asarray(params[n]["w"], np.float32)).ravel()
                           for n in names])
    k = int(round(sparsity * flat.size))
    order = np.argsort(flat, kind="stable")
    keep = np.ones(flat.shape, np.float32)
    keep[order[:k]] = 0.0
    off = 0
    for n in names:
      shape = np.shape(params[n]["w"])
      size = int(np.prod(shape))
      masks[n]["w"] = keep[off:off + size].reshape(shape)
      off += size
  return masks


def apply_masks(params, masks):
  """`w * mask` for every layer with a mask; other leaves unchanged. jit-friendly."""
  out = {}
  for n, p in params.items():
    p = dict(p)
    if n in masks and "w" in masks[n]:
      p["w"] = p["w"] * jnp.asarray(masks[n]["w"], jnp.asarray(p["w"]).dtype)
    out[n] = p
  return out


def sparsity(params) -> float:
  """Fraction of exactly-zero weights over all layers' `"w"`."""
  total = sum(int(np.size(p["w"])) for p in params.values())
  zeros = sum(int(np.sum(np.asarray(p["w"]) == 0)) for p in params.values())
  return zeros / max(total, 1)


def polynomial_sparsity(step, final_sparsity: float, begin_step: int, end_step: int,
                        initial_sparsity: float = 0.0, power: float = 3.0):
  """Zhu & Gupta 2017 eq. 1: `s_t = s_f + (s_i - s_f) (1 - (t - t0) / (t1 - t0))^power`,
  clamped to [t0, t1]."""
  _check_sparsity(final_sparsity)
  frac = jnp.clip((jnp.asarray(step, jnp.float32) - begin_step) /
                  max(end_step - begin_step, 1), 0.0, 1.0)
  return final_sparsity + (initial_sparsity - final_sparsity) * (1.0 - frac) ** power
