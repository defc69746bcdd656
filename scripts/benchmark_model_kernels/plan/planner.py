"""Walk a meta model and derive every per-rank GEMM / fused-MoE shape vLLM runs in one step.

In: a model built on the meta device (`meta_model`) with its config, and the parallel `Layout` (TP,
DP, EP; validated where the flags are read). Out: a `schema.Plan`. Each decoder layer is scanned on
its own: its Linears (and GPT-2 Conv1Ds), 3-D expert parameter blocks and expert ModuleLists are
collected into a `LayerScan`, and `roles` gives each one its role and per-rank size. Where
transformers builds a layer MoE or dense differently from vLLM, vLLM's rule
(`vllm_rules.moe.vllm_moe_layers`) wins. `merge` then merges identical entries over the layer
instances. Anything a layer holds that no rule places becomes `Unsupported`. `plan_model` checks
the config around this (`config_checks`): its values before the build, and no plan whose shapes
rest on a key config.json leaves to transformers' class defaults.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.errors import UsageError
from ..core.plan_schema import ModelInfo, Plan, Unsupported
from ..vllm_rules import moe as vllm_moe
from ..vllm_rules import sharding
from ..vllm_rules.architectures import vllm_refusal
from ..vllm_rules.config import config_value, recorded_reads
from ..vllm_rules.layout import Layout
from ..vllm_rules.moe import vllm_moe_layers
from ..vllm_rules.quant_config import checkpoint_fp8_scheme, per_tensor_activation_scales
from ..vllm_rules.required_keys import alternatives, family_keys, plan_keys
from . import config_checks, roles
from .items import Context, Dims, Item, LayerPlan, LayerScan, MoeItem
from .merge import merge, merge_mixers, ranges

#: Sub-module name fragments of vision/audio towers (never planned).
TOWER_MARKERS = ("vision", "audio", "visual", "multi_modal_projector", "mm_projector", "image_newline")


def _linear_dims(mod: Any) -> Dims | None:
    """(out, in, bias) of an nn.Linear or a transformers Conv1D (weight stored [in, out])."""
    import torch

    if isinstance(mod, torch.nn.Linear):
        return mod.out_features, mod.in_features, mod.bias is not None
    if type(mod).__name__ == "Conv1D" and getattr(mod, "weight", None) is not None and mod.weight.ndim == 2:
        return int(mod.weight.shape[1]), int(mod.weight.shape[0]), getattr(mod, "bias", None) is not None
    return None


def _is_moe_part(name: str) -> bool:
    return name == "router" or name.startswith("shared_expert")


def find_decoder_layers(model: Any, cfg: Any) -> tuple[str, Any]:
    """(path, ModuleList) of the language model's decoder layers: the longest ModuleList outside any
    tower (ties: the one whose length is num_hidden_layers)."""
    import torch

    want = config_value(cfg, "num_hidden_layers", "n_layer", "num_layers")
    best = None
    for path, mod in model.named_modules():
        if not isinstance(mod, torch.nn.ModuleList) or any(t in path for t in TOWER_MARKERS):
            continue
        if path.rsplit(".", 1)[-1] in ("experts",):
            continue
        score = (len(mod) == want, len(mod))
        if best is None or score > best[0]:
            best = (score, path, mod)
    if best is None:
        raise UsageError("model", type(model).__name__, "has no decoder-layer list to plan; pass a decoder LLM config")
    return best[1], best[2]


class Planner:
    """Derives the per-rank plan of one meta model at one parallel layout."""

    def __init__(self, model: Any, cfg: Any, layout: Layout):
        self.model, self.cfg, self.layout = model, cfg, layout
        self.hidden = int(config_value(cfg, "hidden_size", "n_embd", "d_model"))
        self.ctx = Context(cfg, layout, self.hidden, config_value(cfg, "num_attention_heads", "n_head", "num_heads"))

    @property
    def notes(self) -> list[str]:
        return self.ctx.notes

    def scan_layer(self, layer: Any, prefix: str) -> LayerPlan:
        """Collect one decoder layer's modules, then let `roles` place them."""
        import torch

        linears: dict[str, Dims] = {}
        experts: dict[str, Any] = {}
        expert_lists: dict[str, Any] = {}
        stacked: dict[str, Any] = {}
        others: dict[str, Any] = {}
        for rel, mod in layer.named_modules():
            if not rel:
                continue
            dims = _linear_dims(mod)
            if dims is not None:
                if 0 not in dims[:2]:
                    # A zero-width Linear is no GEMM: vLLM builds no layer for it (Qwen2-MoE with
                    # shared_expert_intermediate_size 0 has no shared expert but keeps its gate:
                    # vllm/model_executor/models/qwen2_moe.py: Qwen2MoeSparseMoeBlock.__init__).
                    linears[rel] = dims
                continue
            if isinstance(mod, torch.nn.ModuleList) and rel.rsplit(".", 1)[-1] == "experts":
                expert_lists[rel] = mod
                continue
            own = dict(mod.named_parameters(recurse=False))
            if isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d)) or isinstance(mod, torch.nn.Embedding):
                # The depthwise convs of Mamba2 / GatedDeltaNet are not GEMMs
                # (vllm/model_executor/layers/mamba/mamba_mixer2.py: MambaMixer2, conv1d).
                continue
            if roles.STACKED_GLU <= own.keys() and all(own[w].ndim == 2 for w in roles.STACKED_GLU):
                stacked[rel] = mod
            elif any(p.ndim == 3 for p in own.values()):
                experts[rel] = mod
            elif getattr(own.get("weight"), "ndim", 0) == 2:
                # Only a 2-D `weight` is a GEMM operand. Other 2-D parameters are layer state that
                # vLLM never multiplies as a GEMM: Mamba's A_log, Ernie's e_score_correction_bias.
                others[rel] = mod
        scan = LayerScan(layer, prefix, linears, others)

        for rel, mod in experts.items():
            roles.fused_experts(self.ctx, scan, rel, mod)
        for rel, mod in expert_lists.items():
            roles.modulelist_experts(self.ctx, scan, rel, mod)
        for rel, mod in stacked.items():
            roles.stacked_glu_experts(self.ctx, scan, rel, mod)

        groups: dict[str, dict[str, Dims]] = {}
        for rel, dims in linears.items():
            if rel in scan.consumed:
                continue
            parent, _, leaf = rel.rpartition(".")
            groups.setdefault(parent, {})[leaf] = dims
        for parent, leaves in groups.items():
            roles.group(self.ctx, scan, parent, leaves)
        for rel in others:
            if rel not in scan.consumed:
                n, k = others[rel].weight.shape
                reason = f"{type(others[rel]).__name__} with a 2-D weight has no known role"
                scan.out.unsupported.append(Unsupported(scan.full(rel), int(n), int(k), reason))
        return scan.out

    # ------------------------------------------------------- MoE layer choice
    def _apply_vllm_moe_layers(self, per_layer: list[tuple[int, LayerPlan]]) -> list[tuple[int, LayerPlan]]:
        """Make the MoE-vs-dense choice of each layer vLLM's, where transformers differs: HF DeepSeek
        ignores `moe_layer_freq`, HF Qwen3.5-MoE ignores `mlp_only_layers`/`decoder_sparse_step`.
        A layer HF built as MoE that vLLM runs dense gets the dense MLP of `intermediate_size`
        (DeepseekV2MLP / Qwen2MoeMLP: merged gate_up column + down row); a layer HF built dense that
        vLLM runs as MoE gets the MoE part of an HF MoE layer."""
        want = vllm_moe_layers(self.cfg, len(per_layer))
        if want is None:
            return per_layer
        moe_part = next((self._moe_part(lay) for _, lay in per_layer if lay.moe), None)
        fixed: list[tuple[int, LayerPlan]] = []
        to_dense: list[int] = []
        to_moe: list[int] = []
        for i, lay in per_layer:
            has_moe = bool(lay.moe)
            if has_moe and i not in want:
                mlp_path = lay.moe[0].module.rpartition(".")[0]  # e.g. model.layers.*.mlp
                keep = LayerPlan([it for it in lay.items if not _is_moe_part(it.name)], [],
                                 [u for u in lay.unsupported if not u.module.startswith(mlp_path + ".")])
                self._dense_from_config(keep, mlp_path)
                to_dense.append(i)
                lay = keep
            elif not has_moe and i in want and moe_part is not None:
                items, moes = moe_part
                lay = LayerPlan([it for it in lay.items if it.name not in ("gate_up_proj", "up_proj", "down_proj")]
                                + items, moes, lay.unsupported)
                to_moe.append(i)
            fixed.append((i, lay))
        if to_dense:
            self.ctx.note(f"layers {ranges(to_dense)} run a dense MLP in vLLM (moe_layer_freq / mlp_only_layers / "
                          "decoder_sparse_step) although transformers builds them as MoE")
        if to_moe:
            self.ctx.note(f"layers {ranges(to_moe)} run MoE in vLLM although transformers builds them dense")
        return fixed

    @staticmethod
    def _moe_part(lay: LayerPlan) -> tuple[list[Item], list[MoeItem]]:
        return [it for it in lay.items if _is_moe_part(it.name)], list(lay.moe)

    def _dense_from_config(self, out: LayerPlan, mlp_path: str) -> None:
        """The dense MLP vLLM builds from the config where transformers built MoE
        (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MLP; qwen2_moe.py: Qwen2MoeMLP)."""
        inter = config_value(self.cfg, "intermediate_size")
        bias = bool(getattr(self.cfg, "mlp_bias", False))
        if not inter:
            out.unsupported.append(Unsupported(mlp_path, 0, self.hidden,
                                               "vLLM runs a dense MLP here but the config has no intermediate_size"))
            return
        i_r = sharding.require_divides(int(inter), self.layout.tp, "intermediate_size")
        roles.emit(self.ctx, out, "gate_up_proj", [f"{mlp_path}.gate_proj", f"{mlp_path}.up_proj"],
                   (2 * int(inter), self.hidden, bias), per_rank=(2 * i_r, self.hidden))
        roles.emit(self.ctx, out, "down_proj", [f"{mlp_path}.down_proj"], (self.hidden, int(inter), bias),
                   per_rank=(self.hidden, i_r))

    # ------------------------------------------------------------------ top
    def plan(self, info: ModelInfo) -> Plan:
        prefix, layers = find_decoder_layers(self.model, self.cfg)
        layer_types = getattr(self.cfg, "layer_types", None)
        per_layer: list[tuple[int, LayerPlan]] = []
        for i, layer in enumerate(layers):
            per_layer.append((i, self.scan_layer(layer, f"{prefix}.{i}")))
        per_layer = self._apply_vllm_moe_layers(per_layer)
        top = LayerPlan()
        head = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
        for path, mod in self.model.named_modules():
            if path == prefix or path.startswith(prefix + ".") or any(t in path for t in TOWER_MARKERS):
                continue
            dims = _linear_dims(mod)
            if dims is None:
                continue
            if path.rsplit(".", 1)[-1] == "per_layer_model_projection":
                # Gemma 4: H -> num_layers*H_pl once per step, ColumnParallelLinear
                # (vllm/model_executor/models/gemma4.py: Gemma4Model.__init__)
                roles.emit(self.ctx, top, "per_layer_model_projection", [path], dims)
            elif mod is head:
                # N = round_up(V, 64)/tp, K = H, once per step
                # (vllm/model_executor/layers/vocab_parallel_embedding.py: ParallelLMHead)
                roles.emit(self.ctx, top, "lm_head", [path], dims)
            else:
                top.unsupported.append(Unsupported(path, dims[0], dims[1],
                                                   "Linear outside the decoder layers with no known role"))
        layout = self.layout
        if layout.use_ep and not any(lay.moe for _, lay in per_layer):
            raise UsageError("--ep", layout.ep, "the model has no routed experts; use --ep 1")
        if layout.use_ep and not vllm_moe.vllm_sees_experts(self.cfg):
            raise UsageError("--ep", layout.ep, "vLLM refuses expert parallelism for this config: it reads the expert "
                             f"count from {', '.join(vllm_moe.VLLM_NUM_EXPERTS_KEYS)} and the config sets none at "
                             "its top level (e.g. DBRX keeps moe_num_experts in ffn_config); use --ep 1")
        gemms, moes, unsup = merge(per_layer, top, layer_types)
        attention, mixers = merge_mixers(per_layer)
        per_m = sharding.moe_tokens_per_m(layout)
        moes = tuple(replace(e, tokens_per_m=per_m) for e in moes)
        quantization = getattr(self.cfg, "quantization_config", None)
        scheme, why = checkpoint_fp8_scheme(quantization)
        info = ModelInfo(**{**info.__dict__, "notes": tuple(info.notes) + tuple(self.notes),
                            "num_hidden_layers": len(layers), "hidden_size": self.hidden,
                            "vocab_size": int(config_value(self.cfg, "vocab_size", default=0)),
                            "fp8_scheme": scheme, "fp8_scheme_source": why,
                            "fp8_activation_scales": per_tensor_activation_scales(quantization),
                            "tie_word_embeddings": bool(getattr(self.cfg, "tie_word_embeddings", False))})
        return Plan(model=info, tp=layout.tp, ep=layout.ep, gemms=gemms, moe=moes, attention=attention,
                    mixers_not_timed=mixers, unsupported=unsup)


def plan_from_build(build: Any, info: ModelInfo, layout: Layout) -> Plan:
    """Plan of a MetaBuild (meta_model.build_meta_model) at `layout`."""
    return Planner(build.model, build.config, layout).plan(info)


def has_experts(model: Any) -> bool:
    """Whether the built model holds a routed-expert block (a module named `experts`)."""
    return any(path.rsplit(".", 1)[-1] == "experts" for path, _ in model.named_modules())


def plan_checked(build: Any, info: ModelInfo, layout: Layout, raw: dict[str, Any],
                 allow_defaults: bool = False) -> Plan:
    """`plan_from_build`, refused when the plan depends on a key config.json (`raw`) lacks: the keys
    of the model's family (vllm_rules.required_keys) before planning, the sizes and counts the
    planner read through `config_value` after it. With `allow_defaults` the plan notes them instead."""
    cfg = build.config
    family = family_keys(str(getattr(cfg, "model_type", "")))
    keys = plan_keys(family, has_experts(build.model))
    notes = config_checks.settle_defaults(raw, cfg, keys, allow_defaults, family.class_defaults_only)
    checked = {name for key in keys for name in alternatives(key)}

    def settle_reads(reads: list[str]) -> list[str]:
        sizes = [r for r in reads if r in config_checks.BOUNDS and r not in checked]
        return config_checks.settle_defaults(raw, cfg, sizes, allow_defaults, family.class_defaults_only)

    with recorded_reads() as reads:
        try:
            plan = plan_from_build(build, info, layout)
        except UsageError:
            settle_reads(reads)  # a TP that does not divide a defaulted head count: show the missing key
            raise
    notes += settle_reads(reads)
    if not notes:
        return plan
    return replace(plan, model=replace(plan.model, notes=tuple(plan.model.notes) + tuple(notes)))


def plan_model(model: str, tp: int = 1, ep: int = 1, revision: str | None = None,
               trust_remote_code: bool = False, allow_defaults: bool = False,
               plan_dir: str | None = None) -> Plan:
    """Resolve MODEL, check its config, build it on meta, and plan it at `--tp TP --ep EP`: the one
    call other modules need. `allow_defaults`: plan even where config.json leaves a key the plan
    depends on to transformers' class default (noted in the plan). `plan_dir`: where plans are kept
    between runs (`plan_cache`); a plan kept there for this config, layout and code is returned
    without building the model (never with remote code)."""
    return plan_layout(model, Layout.from_flags(tp, ep), revision=revision, trust_remote_code=trust_remote_code,
                       allow_defaults=allow_defaults, plan_dir=plan_dir)


def plan_layout(model: str, layout: Layout, *, revision: str | None = None, trust_remote_code: bool = False,
                allow_defaults: bool = False, plan_dir: str | None = None) -> Plan:
    """`plan_model` at a `Layout` already built from the flags."""
    from . import config_source, plan_cache

    src = config_source.resolve(model, revision)
    config_checks.check_values(src.raw)
    key = ""
    if plan_dir and not trust_remote_code:
        # The note (where an offline Hub ID was read from) is in the plan: a plan kept online is
        # not the plan of the same config read from the cache or the bundled file.
        source = f"{src.source}; {src.note}" if src.note else src.source
        key = plan_cache.plan_key(src.raw, model=model, source=source, revision=revision, tp=layout.tp,
                                  ep=layout.ep, allow_defaults=allow_defaults)
        kept = plan_cache.read_kept(plan_dir, key)
        if kept is not None:
            return kept
    plan = _plan_source(src, model, layout, revision, trust_remote_code, allow_defaults)
    if key and plan_dir:
        plan_cache.keep(plan_dir, key, plan)
    return plan


def _plan_source(src: Any, model: str, layout: Layout, revision: str | None, trust_remote_code: bool,
                 allow_defaults: bool) -> Plan:
    """The plan of a resolved config, built on meta tensors."""
    from . import meta_model

    location = src.name if src.source == "hub" and not src.note else src.directory  # cached: its folder
    build = meta_model.build_meta_model(src.raw, trust_remote_code=trust_remote_code, location=location,
                                        revision=revision)
    refusal = vllm_refusal(src.raw.get("architectures") or [])
    info = ModelInfo(name=model, source=src.source, model_type=str(src.raw.get("model_type")),
                     architecture=build.architecture, revision=revision,
                     notes=((src.note,) if src.note else ()) + tuple(build.notes) + ((refusal,) if refusal else ()))
    return plan_checked(build, info, layout, src.raw, allow_defaults)


__all__ = ["TOWER_MARKERS", "Planner", "find_decoder_layers", "has_experts", "plan_from_build",
           "plan_checked", "plan_model", "plan_layout"]
