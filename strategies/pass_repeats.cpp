// A layer's passes lowered once per class and copied: a class repeats each pass shape (a layer's forward, its
// backward) over every micro-batch and every layer of its chunks, and nine in ten of a search's lowered ops are in
// such passes. A pass's ops depend on the class's shapes (fixed for an emitter), the layer's blocks, the direction,
// and what the pass finds on entry: the phase, and the stream (and residual fusion) of the op it follows and of the
// op it must wait for. A pass that finds what an earlier one found is that pass's ops and edges again, but for its
// context (micro-batch, chunk, layer) and the two ops it follows and waits for: it is copied (RankClass::repeat), its
// context set, its edges replayed in their order with its own entry ops, and flattening prices it by the original's
// prices (sim/flat_graph.cpp). The original is kept only where that holds as recorded: every op of it in its context,
// every edge into it from it or its two entry ops, the emitter's state on exit its own or theirs.
#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {
namespace {

thread_local bool repeats_off = false;

}  // namespace

PassRepeatsOff::PassRepeatsOff() : was_off_(repeats_off) { repeats_off = true; }
PassRepeatsOff::~PassRepeatsOff() { repeats_off = was_off_; }

Emitter::PassEntry Emitter::pass_entry(const void* blocks, bool backward) const {
  PassEntry entry;
  entry.blocks = blocks;
  entry.backward = backward;
  entry.phase = phase_;
  entry.recomputed = recomputed_;
  entry.fp8 = fp8_linears();
  entry.attention_window = attention_window_;
  entry.weight_gradients = weight_gradient_output();
  if (layer_ >= 0 && static_cast<std::size_t>(layer_) < sh_.moe_layers.size()) entry.moe = sh_.moe_layer(layer_);
  if (chain != kNoOp) {
    const Op& op = rc_.op(chain);
    entry.chain_stream = static_cast<int>(op.stream);
    entry.chain_fuses_residual = op.fuses_residual;  // emit_residual reads it
  }
  if (pending_wait != kNoOp) {
    entry.pending_stream = static_cast<int>(rc_.op(pending_wait).stream);
    entry.pending_is_chain = pending_wait == chain;
  }
  return entry;
}

Emitter::PassOriginal* Emitter::begin_pass_copy(const void* blocks, bool backward) {
  not_recorded_.recording = false;
  if (repeats_off) return &not_recorded_;
  const PassEntry entry = pass_entry(blocks, backward);
  for (PassOriginal& original : pass_originals_) {
    if (!(original.entry == entry)) continue;
    if (!original.repeatable) return &not_recorded_;
    copy_pass(original);
    return nullptr;
  }
  PassOriginal& original = pass_originals_.emplace_back();  // passes do not nest: it stays where it is till recorded
  original.entry = entry;
  original.recording = true;
  original.layer = layer_;
  original.first = static_cast<OpIndex>(rc_.size());
  original.edges_first = boost::num_edges(rc_.graph);
  original.chain = chain;
  original.pending = pending_wait;
  original.loss_completions = loss_complete.size();
  return &original;
}

void Emitter::record_pass(PassOriginal& original) {
  if (!original.recording) return;
  original.recording = false;
  original.count = static_cast<OpIndex>(rc_.size()) - original.first;
  original.edges_count = boost::num_edges(rc_.graph) - original.edges_first;
  original.exit_chain = chain;
  original.exit_pending = pending_wait;
  const auto inside = [&](std::size_t i) { return i >= original.first && i < original.first + original.count; };
  const auto entry_or_inside = [&](std::size_t i) {
    return inside(i) || i == original.chain || i == original.pending;
  };
  bool repeatable = phase_ == original.entry.phase && recomputed_ == original.entry.recomputed &&
                    layer_ == original.layer && loss_complete.size() == original.loss_completions &&
                    (chain == kNoOp || entry_or_inside(chain)) &&
                    (pending_wait == kNoOp || entry_or_inside(pending_wait));
  for (OpIndex i = original.first; repeatable && i < original.first + original.count; ++i) {
    const Op& op = rc_.op(i);
    repeatable = op.micro_batch == micro_batch_ && op.chunk == chunk_ && op.layer == layer_;
  }
  for (std::size_t k = original.edges_first; repeatable && k < original.edges_first + original.edges_count; ++k) {
    const auto& edge = rc_.graph.m_edges[k];
    repeatable = inside(edge.m_target) && entry_or_inside(edge.m_source);
  }
  original.repeatable = repeatable;
}

void Emitter::copy_pass(const PassOriginal& original) {
  const OpIndex first = rc_.repeat(original.first, original.count);
  for (OpIndex i = first; i < first + original.count; ++i) {
    Op& op = rc_.graph[i];
    op.micro_batch = micro_batch_;
    op.chunk = static_cast<std::int16_t>(chunk_);
    op.layer = layer_;
  }
  // An op of the original as this copy names it.
  const OpIndex chain_on_entry = chain, pending_on_entry = pending_wait;
  const auto copied = [&](std::size_t i) -> OpIndex {
    if (i >= original.first && i < original.first + original.count)
      return static_cast<OpIndex>(i - original.first + first);
    if (i == original.chain) return chain_on_entry;
    if (i == original.pending) return pending_on_entry;
    return kNoOp;
  };
  for (std::size_t k = original.edges_first; k < original.edges_first + original.edges_count; ++k) {
    const auto& edge = rc_.graph.m_edges[k];  // read before an edge is added: the list may move
    const OpIndex source = copied(edge.m_source), target = copied(edge.m_target);
    rc_.add_dependency(source, target);
  }
  chain = original.exit_chain == kNoOp ? kNoOp : copied(original.exit_chain);
  pending_wait = original.exit_pending == kNoOp ? kNoOp : copied(original.exit_pending);
}

}  // namespace twin::lowering
