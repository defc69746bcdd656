"""vLLM as the planner: the plan read off the class vLLM builds for the config and layout.

In: config.json, a `Layout`, the target GPU, and the rules planner's result for the same config
(its plan, or the error it stopped with). Out: a `VllmPlanned`: the plan of vLLM's own class, built
on meta as rank 0 of the layout (`vllm_build`; the CUDA class on the target GPU for a
platform-split family, `vllm_platform`), and one line per difference from the rules' plan. Each
decoder layer's modules become plan entries as the rules name them (`vllm_roles`): every linear
layer a GEMM entry by its kind (column / row / replicated / vocab) and per-rank weight shape, on
ceil(M/TP) rows where vLLM runs it on this rank's sequence-parallel chunk; every RoutedExperts
block a fused-MoE entry with its routing, activation and routed scaling factor, on M x DP tokens
under expert parallelism; every Attention / MLAAttention an attention entry; every other token
mixer, and every module holding weights no row times, a `MixerNotTimed` with the reason. Identical
entries merge over the layers (`plan.merge`), so the per-step counts are vLLM's by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import UsageError
from ..core.plan_schema import AttentionEntry, MixerNotTimed, ModelInfo, Plan, Unsupported
from ..plan.items import Item, LayerPlan, MoeItem, star
from ..plan.merge import merge, merge_mixers
from ..plan.planner import TOWER_MARKERS
from ..vllm_rules.layout import Layout
from . import vllm_layers, vllm_roles
from .check import against_text
from .compare import compare, plan_side
from .vllm_build import VllmBuildProblem, VllmRefused, build_vllm_model
from .vllm_platform import TargetGpu

#: Module classes whose weights are no GEMM and need no row: norms, embeddings, rotary tables.
NO_ROW_FRAGMENTS = ("Norm", "Embedding", "Rotary", "RoPE", "Scaling")


@dataclass(frozen=True)
class VllmPlanned:
    """vLLM's plan and what the rules planner said differently."""

    plan: Plan
    planner: str
    """e.g. "vllm 0.33.0 vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM (CUDA class ...)"."""
    differences: tuple[str, ...]
    """One line per difference from the rules' plan (or why the rules made none)."""


def _decoder_layers(model: Any, want: int) -> tuple[str, Any]:
    """(path, ModuleList) of vLLM's decoder layers: the longest ModuleList outside any tower (ties:
    the one of `want` layers)."""
    import torch

    best = None
    for path, mod in model.named_modules():
        if not isinstance(mod, torch.nn.ModuleList) or any(t in path for t in TOWER_MARKERS):
            continue
        if path.rsplit(".", 1)[-1] == "experts":
            continue
        score = (len(mod) == want, len(mod))
        if best is None or score > best[0]:
            best = (score, path, mod)
    if best is None:
        raise VllmBuildProblem(f"{type(model).__name__} has no decoder-layer list to plan")
    return best[1], best[2]


class _Reader:
    """Reads one model vLLM built into per-layer plans."""

    def __init__(self, model: Any, layout: Layout, text_config: Any):
        from vllm.model_executor.layers.attention.attention import Attention
        from vllm.model_executor.layers.attention.mla_attention import MLAAttention

        self.model, self.layout, self.cfg = model, layout, text_config
        self.attention_classes = (Attention, MLAAttention)
        self.notes: list[str] = []
        self.head = vllm_layers.lm_head(model)
        self.seen: set[int] = set()
        """Modules already read: a module reachable under two paths (Gemma 4's self_decoder views
        the decoder layers) is read once, as `model.named_modules()` (and the cross-check) sees it."""

    def note(self, text: str) -> None:
        if text and text not in self.notes:
            self.notes.append(text)

    def layer(self, layer: Any, prefix: str) -> LayerPlan:
        """One decoder layer's (or the top level's) entries."""
        import torch
        from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
        from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
        from vllm.model_executor.layers.linear import LinearBase

        out = LayerPlan()
        chunked: list[str] = []
        covered: list[str] = []
        for rel, mod in layer.named_modules():
            full = f"{prefix}.{rel}" if prefix and rel else prefix or rel
            if any(t in full for t in TOWER_MARKERS) or any(rel.startswith(c) for c in covered):
                continue
            if id(mod) in self.seen:
                covered.append(rel + "." if rel else "")
                continue
            self.seen.add(id(mod))
            if vllm_layers.runs_on_chunk(mod):
                chunked.append(vllm_layers.chunk_prefix(rel, mod))
            rows = self.layout.tp if any(rel.startswith(c) for c in chunked) else 1
            parent = layer.get_submodule(rel.rpartition(".")[0]) if "." in rel else layer
            if self.head is not None and mod is self.head[1]:
                w = mod.weight
                out.items.append(Item("lm_head", [star(full)], int(w.shape[0]), int(w.shape[1]), "vocab",
                                      getattr(mod, "bias", None) is not None))
                covered.append(rel + ".")
                continue
            attention = vllm_layers.attention_shape(mod)
            if attention is not None:  # its linear layers (an attention class may hold them) are read on
                out.attention.append(self._attention_entry(attention, mod, parent, star(full)))
                continue
            if isinstance(mod, AttentionLayerBase):  # a token mixer that is not softmax or latent attention
                out.mixers.append(MixerNotTimed(vllm_roles.mixer_name(mod), (star(full),), 1,
                                                vllm_roles.mixer_reason(mod, self.cfg)))
            if isinstance(mod, LinearBase):
                if vllm_layers.is_conv_taps(rel, mod):
                    continue
                self._linear(out, rel, full, mod, parent, rows)
                covered.append(rel + ".")
            elif isinstance(mod, RoutedExperts):
                self._experts(out, full, mod, parent)
                covered.append(rel + ".")
            elif isinstance(mod, torch.nn.Module) and rel:
                self._weights_no_row(out, full, mod)
        return out

    def _linear(self, out: LayerPlan, rel: str, full: str, mod: Any, parent: Any, rows: int) -> None:
        n, k = (int(x) for x in mod.weight.shape)
        kind = vllm_layers.linear_kind(mod)
        if kind not in ("column", "row", "replicated"):
            out.unsupported.append(Unsupported(star(full), n, k, f"vLLM's {type(mod).__name__} is no linear kind "
                                               "the plan knows (column, row, replicated)"))
            return
        role = vllm_roles.linear_role(rel, parent, mod, self.attention_classes)
        out.items.append(Item(role, [star(full)], n, k, kind, getattr(mod, "bias", None) is not None, rows))

    def _experts(self, out: LayerPlan, full: str, mod: Any, parent: Any) -> None:
        routing, note = vllm_roles.routing(mod, vllm_layers.routed_scale(mod, parent))
        self.note(note)
        i_r = int(mod.intermediate_size_per_partition)
        gated = int(mod.w13_weight.shape[1]) == 2 * i_r
        act = vllm_layers.moe_activation(mod)
        block = star(full.removesuffix(".routed_experts"))
        if act.startswith("vllm:"):
            out.unsupported.append(Unsupported(block, 2 * i_r if gated else i_r, int(mod.hidden_size),
                                               f"vLLM's expert activation {act[5:]} has no FlashInfer ActivationType"))
            return
        out.moe.append(MoeItem("experts", block, int(mod.hidden_size), i_r, int(mod.local_num_experts),
                               int(mod.global_num_experts), int(mod.top_k), act, routing, gated,
                               bool(mod.moe_config.has_bias)))

    def _weights_no_row(self, out: LayerPlan, full: str, mod: Any) -> None:
        """A module holding 2-D (or larger) weights of its own that no GEMM, MoE or attention row
        times: listed, never dropped (norms, embeddings and rotary tables need no row)."""
        kind = type(mod).__name__
        own = [p for p in mod.parameters(recurse=False) if p.ndim >= 2]
        if not own or any(f in kind for f in NO_ROW_FRAGMENTS):
            return
        shapes = ", ".join("x".join(str(int(d)) for d in p.shape) for p in own)
        out.mixers.append(MixerNotTimed(f"vllm:{kind}", (star(full),), 1,
                                        f"{kind} ({type(mod).__module__}) holds weights {shapes} that no GEMM, "
                                        "MoE or attention row of this plan times"))

    def _attention_entry(self, a: Any, mod: Any, parent: Any, full: str) -> AttentionEntry:
        """The plan's attention entry of a vLLM Attention / MLAAttention (`vllm_layers.attention_shape`)."""
        tp = self.layout.tp
        path = full.removesuffix(".attn").removesuffix(".mla_attn.mla_attn").removesuffix(".mla_attn")
        if a.kind == "mla":
            rank = int(mod.kv_lora_rank)
            return AttentionEntry("mla" + (".sliding" if a.sliding_window else ""), (path,), "mla", 1, a.num_heads,
                                  1, a.head_size, a.head_size_v, a.num_heads * tp, 1, kv_lora_rank=rank,
                                  qk_rope_head_dim=a.head_size - rank, qk_nope_head_dim=a.prefill_dims[0],
                                  v_head_dim=a.prefill_dims[1], sliding_window=a.sliding_window)
        total_q, total_kv = vllm_layers.total_heads(parent, a.num_heads * tp, a.num_kv_heads * tp)
        name = "attn" + (".sliding" if a.sliding_window else ".chunked" if a.chunk else "") + (
            ".kv_shared" if a.kv_shared else "")
        return AttentionEntry(name, (path,), "mha", 1, a.num_heads, a.num_kv_heads, a.head_size, a.head_size_v,
                              total_q, total_kv, sliding_window=a.sliding_window, attention_chunk_size=a.chunk,
                              kv_shared=a.kv_shared)


def plan_of_build(built: Any, layout: Layout, info: ModelInfo) -> Plan:
    """The plan of a `VllmBuild` at `layout`."""
    cfg = built.text_config
    want = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    prefix, layers = _decoder_layers(built.model, want)
    reader = _Reader(built.model, layout, cfg)
    per_layer = [(i, reader.layer(layer, f"{prefix}.{i}")) for i, layer in enumerate(layers)]
    top = _top_level(reader, built.model, prefix)
    gemms, moes, unsup = merge(per_layer, top, getattr(cfg, "layer_types", None))
    attention, mixers = merge_mixers(per_layer + [(-1, top)])
    if layout.use_ep and not moes:
        raise UsageError("--ep", layout.ep, "the model has no routed experts; use --ep 1")
    moes = tuple(replace(e, tokens_per_m=layout.tokens_per_m) for e in moes)
    info = replace(info, notes=tuple(info.notes) + tuple(reader.notes), num_hidden_layers=len(layers),
                   hidden_size=info.hidden_size or int(getattr(cfg, "hidden_size", 0) or 0),
                   vocab_size=info.vocab_size or int(getattr(cfg, "vocab_size", 0) or 0))
    return Plan(model=info, tp=layout.tp, ep=layout.ep, gemms=gemms, moe=moes, attention=attention,
                mixers_not_timed=mixers, unsupported=unsup)


def _top_level(reader: _Reader, model: Any, prefix: str) -> LayerPlan:
    """The entries outside the decoder layers: the LM head and any other linear layer."""
    top = LayerPlan()
    for name, child in model.named_children():
        sub = reader.layer(child, name) if not prefix.startswith(name) else _outside(reader, child, name, prefix)
        top.items += sub.items
        top.moe += sub.moe
        top.unsupported += sub.unsupported
        top.mixers += sub.mixers
    return top


def _outside(reader: _Reader, module: Any, path: str, prefix: str) -> LayerPlan:
    """The entries of `module` (at `path`, an ancestor of the decoder layers) outside those layers."""
    out = LayerPlan()
    for name, child in module.named_children():
        full = f"{path}.{name}"
        if full == prefix:
            continue
        sub = _outside(reader, child, full, prefix) if prefix.startswith(full + ".") else reader.layer(child, full)
        out.items += sub.items
        out.moe += sub.moe
        out.unsupported += sub.unsupported
        out.mixers += sub.mixers
    return out


def plan_with_vllm(raw: dict[str, Any], layout: Layout, info: ModelInfo, rules: Plan | None, rules_error: str, *,
                   gpu: TargetGpu | None, trust_remote_code: bool = False,
                   code_dir: str | None = None) -> VllmPlanned:
    """vLLM's plan of config.json `raw` at `layout`, and its differences from the rules' `rules`
    (None when the rules planner stopped, with `rules_error`). `UsageError` when vLLM refuses the
    config or layout; `VllmBuildProblem` when its class cannot be built on this machine."""
    try:
        with build_vllm_model(raw, layout.tp, layout.ep, trust_remote_code=trust_remote_code, code_dir=code_dir,
                              gpu=gpu) as built:
            planner = against_text(built)
            # The model's architecture stays the rules' (the transformers class, as a --resume compares it);
            # the class vLLM built is the planner line's.
            plan = plan_of_build(built, layout, replace(
                info, architecture=info.architecture or built.model_class.rsplit(".", 1)[-1]))
    except VllmRefused as e:
        raise UsageError("--planner", "vllm", f"{e}" + (f"; the rules planner: {rules_error}" if rules_error
                                                         else "")) from None
    if rules is None:
        differences: tuple[str, ...] = (f"the rules planner made no plan: {rules_error}",)
    else:
        differences = tuple(compare(plan_side(rules), plan_side(plan)))
        differences += tuple(f"the rules planner leaves {u.module} unsupported: {u.reason}" for u in rules.unsupported)
    return VllmPlanned(plan, planner, differences)


__all__ = ["NO_ROW_FRAGMENTS", "VllmPlanned", "plan_of_build", "plan_with_vllm"]
