// Op graph checks: dependency cycles by Boost.Graph's topological sort, and pipeline send/recv pairing
// across rank classes (each tag matched exactly once, on the peer class, by the opposite kind).
#include "core/op_graph.hpp"

#include <iterator>
#include <map>
#include <stdexcept>
#include <tuple>

#include <boost/graph/topological_sort.hpp>
#include <fmt/format.h>

namespace twin {

namespace {

// One transfer: (sending class, receiving class, tag).
using TransferKey = std::tuple<int, int, std::int64_t>;

struct TransferEnds {
  int sends = 0;
  int recvs = 0;
  OpIndex example = 0;  // an op of the transfer, for the message
  int example_class = 0;
};

std::string describe(const RankClass& rank_class, OpIndex index) {
  return fmt::format("{} ({}, class {} '{}')", op_id(rank_class.index, index), op_name(rank_class.op(index)),
                     rank_class.index, rank_class.label);
}

void check_acyclic(const RankClass& rank_class) {
  std::vector<OpGraph::vertex_descriptor> order;
  try {
    boost::topological_sort(rank_class.graph, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    throw std::logic_error(fmt::format("op graph of rank class {} '{}' has a dependency cycle", rank_class.index,
                                       rank_class.label));
  }
}

}  // namespace

std::size_t IterationGraph::total_ops() const {
  std::size_t total = 0;
  for (const RankClass& rank_class : classes) total += rank_class.size();
  return total;
}

std::string op_id(int rank_class, OpIndex index) { return fmt::format("c{}.{}", rank_class, index); }

void check_well_formed(const IterationGraph& graph) {
  const int class_count = static_cast<int>(graph.classes.size());
  std::map<TransferKey, TransferEnds> transfers;
  for (int c = 0; c < class_count; ++c) {
    const RankClass& rank_class = graph.classes[c];
    if (rank_class.index != c)
      throw std::logic_error(fmt::format("rank class at position {} says its index is {}", c, rank_class.index));
    check_acyclic(rank_class);
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const Op& op = rank_class.op(i);
      if (op.kind != OpKind::send && op.kind != OpKind::recv) continue;
      if (is_ring_send(op)) continue;  // ring exchange: no recv op
      if (op.peer < 0 || op.peer >= class_count)
        throw std::logic_error(fmt::format("{} names peer class {}, which does not exist", describe(rank_class, i),
                                           op.peer));
      const bool is_send = op.kind == OpKind::send;
      TransferKey key = is_send ? TransferKey{c, op.peer, op.p2p_tag} : TransferKey{op.peer, c, op.p2p_tag};
      TransferEnds& ends = transfers[key];
      (is_send ? ends.sends : ends.recvs) += 1;
      ends.example = i;
      ends.example_class = c;
    }
  }
  for (const auto& [key, ends] : transfers) {
    if (ends.sends == 1 && ends.recvs == 1) continue;
    const auto& [from, to, tag] = key;
    throw std::logic_error(fmt::format(
        "p2p tag {} from class {} to class {} has {} send(s) and {} recv(s), expected exactly one of each (e.g. {})",
        tag, from, to, ends.sends, ends.recvs, describe(graph.classes[ends.example_class], ends.example)));
  }
}

}  // namespace twin
