"""Weighted sums of losses, and the papers' full objectives as named compositions.

* ``weighted_sum`` — generic: ``terms=[{"name": "triplet", "weight": 1.0, "params": {...}}, ...]``,
  each term built through the registry by name, ``L = Σ_t w_t · L_t(sim, rel)``.
* ``bcls`` — BCLS (Sec. III-D, last paragraph): ``L_T-SN + L_K-SW-HS`` (Eqs. 14, 19). The ablations
  of Table VIII / Fig. 5 are parameters: ``weight_triplet=0`` (w/o T-SN), ``weight_kendall=0``
  (w/o K-SW-HS), ``kendall="kendall"`` (w/o SW-HS: the full O(B³) Eq. 17), ``triplet="triplet"``
  (T-HN instead of T-SN).
* ``listwise`` — Listwise ITR Eq. 22: ``L_Triplet + L_S-NDCG`` where L_Triplet is Triplet-HN averaged
  over anchors per direction (Eqs. 1–3: ``(1/N)Σ_i``, so ``reduction="mean"``) and S-NDCG is the
  registered ``sndcg`` loss (Eqs. 19–21), which expects relevance in [0, 1].
* ``cvsepp`` — CVSE++ (Ladder paper): the registered ``ladder`` loss (``adaptive=True``: ``adaptive_ladder``).
* ``vsepp`` — VSE++: Triplet-HN (max violation, sum over the batch).

Components are built **by name at construction time**, so this module imports even before the
component modules exist. A term of weight 0 is still validated but never evaluated and does not
make the composite require a relevance matrix. Diagnostics of the terms are merged with the
prefix ``"<label>/"`` (label = term name, ``name#k`` for repeats), plus ``"<label>/value"``, the
unweighted value of the term.

Warm-up (``set_warmup``, :mod:`coherent_itr.losses.base`) reaches every term: during warm-up a
Triplet-HN term (VSE++, the listwise paper's triplet, BCLS's T-HN ablation) or a ladder term sums
over all negatives; the other terms are unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import ITRLoss, check_choice, check_range, stat
from .registry import build, register

_TERM_KEYS = ("name", "weight", "params")


def _check_weight(owner: str, field: str, w) -> float:
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
        raise ValueError(f"{owner}: {field}={w!r} must be a finite number ≥ 0")
    return float(w)


def _check_params(owner: str, field: str, params) -> dict:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ValueError(f"{owner}: {field} must be a dict of loss parameters, got {type(params).__name__}")
    return dict(params)


class CompositeLoss(ITRLoss):
    """``Σ_t w_t · L_t``: the shared machinery of every composition in this module."""

    def __init__(self, owner: str, specs: list[tuple[str, float, dict]]) -> None:
        super().__init__()
        if not specs:
            raise ValueError(f"{owner}: needs at least one term")
        self.labels: list[str] = []
        self.weights: list[float] = []
        modules = []
        seen: dict[str, int] = {}
        for k, (name, weight, params) in enumerate(specs):
            try:
                modules.append(build(name, **params))
            except ValueError as exc:
                raise ValueError(f"{owner}: term {k} ({name!r}): {exc}") from exc
            seen[name] = seen.get(name, 0) + 1
            self.labels.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
            self.weights.append(weight)
        self.terms = torch.nn.ModuleList(modules)
        if all(w == 0 for w in self.weights):
            raise ValueError(f"{owner}: every term has weight 0; the loss would be identically 0")
        self.requires_relevance = any(
            getattr(m, "requires_relevance", False) and w > 0 for m, w in zip(self.terms, self.weights)
        )
        self.capturable = all(getattr(m, "capturable", False) for m, w in zip(self.terms, self.weights) if w > 0)

    def check_relevance(self, rel: torch.Tensor) -> None:
        """Each term's own check of a relevance matrix (those that have one)."""
        for m, w in zip(self.terms, self.weights):
            if w > 0 and hasattr(m, "check_relevance"):
                m.check_relevance(rel)

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        total = sim.new_zeros(())
        diag: dict[str, Any] = {}
        for label, w, term in zip(self.labels, self.weights, self.terms):
            if w == 0:
                continue
            value = term(sim, rel)
            total = total + w * value
            diag[f"{label}/value"] = stat(value.detach())
            for key, val in getattr(term, "diagnostics", {}).items():
                diag[f"{label}/{key}"] = val
        self.diagnostics = diag
        return total


@register("weighted_sum")
class WeightedSumLoss(CompositeLoss):
    """Generic ``Σ_t w_t · L_t`` of registered losses given as ``[{"name", "weight", "params"}, ...]``."""

    def __init__(self, terms: list) -> None:
        owner = "weighted_sum"
        if not isinstance(terms, (list, tuple)) or not terms:
            raise ValueError(
                f"{owner}: terms must be a non-empty list of "
                f'{{"name": ..., "weight": ..., "params": {{...}}}} dicts, got {terms!r}'
            )
        specs = []
        for k, t in enumerate(terms):
            if not isinstance(t, dict) or "name" not in t:
                raise ValueError(f"{owner}: terms[{k}] must be a dict with at least a 'name', got {t!r}")
            unknown = sorted(set(t) - set(_TERM_KEYS))
            if unknown:
                raise ValueError(f"{owner}: terms[{k}] has unknown key(s) {unknown}; valid keys: {list(_TERM_KEYS)}")
            specs.append(
                (
                    t["name"],
                    _check_weight(owner, f"terms[{k}].weight", t.get("weight", 1.0)),
                    _check_params(owner, f"terms[{k}].params", t.get("params")),
                )
            )
        super().__init__(owner, specs)


@register("bcls")
class BCLSLoss(CompositeLoss):
    """BCLS: ``weight_triplet · L_T-SN + weight_kendall · L_K-SW-HS`` (BCLS Eqs. 14 and 19)."""

    def __init__(
        self,
        weight_triplet: float = 1.0,
        weight_kendall: float = 1.0,
        triplet: str = "triplet_sn",
        kendall: str = "kendall_sw_hs",
        triplet_params: dict | None = None,
        kendall_params: dict | None = None,
    ) -> None:
        owner = "bcls"
        check_choice(owner, "triplet", triplet, ("triplet_sn", "triplet"))
        check_choice(owner, "kendall", kendall, ("kendall_sw_hs", "kendall"))
        terms = (
            ("triplet", triplet, weight_triplet, triplet_params),
            ("kendall", kendall, weight_kendall, kendall_params),
        )
        super().__init__(
            owner,
            [
                (name, _check_weight(owner, f"weight_{role}", w), _check_params(owner, f"{role}_params", p))
                for role, name, w, p in terms
            ],
        )


@register("listwise")
class ListwiseLoss(CompositeLoss):
    """Listwise ITR Eq. 22: mean-reduced Triplet-HN (Eqs. 1–3) + S-NDCG (Eqs. 19–21)."""

    def __init__(
        self,
        weight_triplet: float = 1.0,
        weight_sndcg: float = 1.0,
        triplet_params: dict | None = None,
        sndcg_params: dict | None = None,
    ) -> None:
        owner = "listwise"
        tp = {"margin": 0.2, "max_violation": True, "reduction": "mean"}
        tp.update(_check_params(owner, "triplet_params", triplet_params))
        super().__init__(
            owner,
            [
                ("triplet", _check_weight(owner, "weight_triplet", weight_triplet), tp),
                (
                    "sndcg",
                    _check_weight(owner, "weight_sndcg", weight_sndcg),
                    _check_params(owner, "sndcg_params", sndcg_params),
                ),
            ],
        )


@register("cvsepp")
class CVSEppLoss(CompositeLoss):
    """CVSE++: the ladder loss (Ladder paper Eqs. 5–8), or the adaptive ladder (Eqs. 9–12) with ``adaptive=True``."""

    def __init__(self, adaptive: bool = False, ladder_params: dict | None = None) -> None:
        owner = "cvsepp"
        if not isinstance(adaptive, bool):
            raise ValueError(f"{owner}: adaptive={adaptive!r} must be True or False")
        super().__init__(
            owner,
            [("adaptive_ladder" if adaptive else "ladder", 1.0, _check_params(owner, "ladder_params", ladder_params))],
        )


@register("vsepp")
class VSEppLoss(CompositeLoss):
    """VSE++: Triplet-HN (max violation), margin 0.2, summed over the batch (BCLS Eqs. 12–13)."""

    def __init__(self, margin: float = 0.2, reduction: str = "sum") -> None:
        check_range("vsepp", "margin", margin, lo=0.0)
        super().__init__("vsepp", [("triplet", 1.0, {"margin": margin, "max_violation": True, "reduction": reduction})])
