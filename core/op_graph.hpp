// Op graphs: one per rank class (ranks that behave identically are lowered and simulated once).
// Vertices are ops in issue order; edges are dependencies beyond stream order (event waits).
// Send/recv ops of different rank classes with equal p2p_tag are the two ends of one transfer.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <boost/pending/container_traits.hpp>

#include "core/op.hpp"

// An op's in- and out-edges in a vector with room for two inline: almost every op has at most two of each
// way, and a std::vector per direction per op was a heap allocation (and a free) per op, about a fifth of a
// search's time. Boost.Graph takes a custom container through container_gen and parallel_edge_traits (its
// "Customizing the Adjacency List Storage"); its push and erase helpers learn that a small vector is a vector
// from the overloads below. (Its edge(u, v) lookup would need them declared before its own header: twin does
// not call it.)
namespace twin {
struct SmallVecS {};
}  // namespace twin

namespace boost {
namespace graph_detail {
template <class T, std::size_t N, class... Rest>
vector_tag container_category(const boost::container::small_vector<T, N, Rest...>&) {
  return {};
}
template <class T, std::size_t N, class... Rest>
unstable_tag iterator_stability(const boost::container::small_vector<T, N, Rest...>&) {
  return {};
}
}  // namespace graph_detail
namespace container {  // where argument-dependent lookup looks
using graph_detail::container_category;
using graph_detail::iterator_stability;
}  // namespace container
}  // namespace boost

#include <boost/graph/adjacency_list.hpp>

namespace boost {
template <class ValueType>
struct container_gen<twin::SmallVecS, ValueType> {
  using type = boost::container::small_vector<ValueType, 1>;
};
template <>
struct parallel_edge_traits<twin::SmallVecS> {
  using type = allow_parallel_edge_tag;
};
}  // namespace boost

namespace twin {

// Edges are only ever added: the graph's own edge list in a vector (a std::list node per dependency was a
// heap allocation and a free per edge), each op's in- and out-edges in small vectors (above).
using OpGraph = boost::adjacency_list<SmallVecS, boost::vecS, boost::bidirectionalS, Op, boost::no_property,
                                      boost::no_property, boost::vecS>;
using OpIndex = std::uint32_t;
inline constexpr OpIndex kNoOpIndex = std::numeric_limits<OpIndex>::max();

// A communicator's placement: `size` ranks, `ranks_per_node` of them share a node, over `nodes` nodes.
struct GroupSpan {
  int size = 1;
  int ranks_per_node = 1;
  int nodes = 1;
};
inline constexpr int kGroupKindCount = 10;

// Ops [first, first + count) of a class repeat its ops [original, original + count) one for one: each equal to its
// original but for its context (micro_batch, chunk, layer) and the edges into the range from before it. The
// lowering copies a layer's repeated passes so (strategies/pass_repeats.cpp), and flattening prices such a range
// by its original's prices (sim/flat_graph.cpp).
struct RepeatedOps {
  OpIndex first = 0;
  OpIndex original = 0;
  OpIndex count = 0;
};

struct RankClass {
  int index = 0;          // position in IterationGraph::classes
  int pipeline = 0;       // which pipeline (asymmetric plans have several)
  int stage = 0;          // pipeline stage
  int num_ranks = 1;      // GPUs that run exactly this graph
  int first_rank = 0;     // global rank of one representative member (trace pid, placement)
  int node_group = 0;     // index into Cluster::node_groups: the GPU kind and links of this class
  // How each communicator of this class lies on the cluster (indexed by GroupKind).
  std::array<GroupSpan, kGroupKindCount> spans{};
  // Communicators of a kind in further sizes, for classes whose layers differ in layout (per-layer
  // hybrid plans: TP 2 on one layer, TP 4 on the next): a collective whose group_size is not
  // spans[kind].size runs on the entry here of its kind and size.
  std::vector<std::pair<GroupKind, GroupSpan>> extra_spans;
  std::string label;      // "stage 0", shown in reports and traces
  OpGraph graph;  // ops are added through add(), which keeps last_on() current
  // In order of `first`, not overlapping. Code that edits lowered ops must keep each repeat equal to its original
  // but for the context above (a change made to every op alike does), or clear this.
  std::vector<RepeatedOps> repeats;

  OpIndex add(const Op& op) {
    // What boost::add_vertex does for an unnamed vecS graph, the vertex (the op and its two edge lists) built in
    // place: add_vertex builds it aside and moves it in, writing every vertex twice (a search adds millions).
    graph.m_vertices.emplace_back(op);
    const auto index = static_cast<OpIndex>(graph.m_vertices.size() - 1);
    if (op.stream < Stream::count) last_of_stream_[static_cast<int>(op.stream)] = index;
    return index;
  }
  // Appends copies of ops [original, original + count) (their context and edges are the caller's to set), recorded
  // in `repeats`; returns the first copy's index.
  OpIndex repeat(OpIndex original, OpIndex count) {
    const auto first = static_cast<OpIndex>(size());
    auto& vertices = graph.m_vertices;
    // Room first, so that the originals do not move while they are read; doubling, as push_back would.
    if (vertices.capacity() < vertices.size() + count)
      vertices.reserve(std::max(vertices.size() + count, 2 * vertices.capacity()));
    for (OpIndex i = 0; i < count; ++i) add(graph[original + i]);
    repeats.push_back({first, original, count});
    return first;
  }
  // The last op added on `stream`, or kNoOpIndex when none (kept as ops are added: a search asks it of graphs
  // of millions of ops, which a scan back through them read whole from memory).
  OpIndex last_on(Stream stream) const { return last_of_stream_.at(static_cast<int>(stream)); }
  // `then` starts only after `first` has finished (an event wait; stream order needs no edge).
  void add_dependency(OpIndex first, OpIndex then) { boost::add_edge(first, then, graph); }
  std::size_t size() const { return boost::num_vertices(graph); }
  const Op& op(OpIndex i) const { return graph[i]; }
  // The communicator a collective of `kind` over `size` ranks runs on; nullptr when the class has none.
  const GroupSpan* span_of(GroupKind kind, int size) const {
    const GroupSpan& main = spans[static_cast<int>(kind)];
    if (main.size == size) return &main;
    for (const auto& [extra_kind, span] : extra_spans)
      if (extra_kind == kind && span.size == size) return &span;
    return nullptr;
  }

 private:
  static std::array<OpIndex, kStreamCount> no_ops() {
    std::array<OpIndex, kStreamCount> none;
    none.fill(kNoOpIndex);
    return none;
  }
  std::array<OpIndex, kStreamCount> last_of_stream_ = no_ops();
};

struct IterationGraph {
  std::vector<RankClass> classes;
  std::size_t total_ops() const;
};

// Global op id as the executor and traces name it: "c<class>.<index>".
std::string op_id(int rank_class, OpIndex index);

// Throws std::logic_error when a class graph has a dependency cycle or a send has no matching recv:
// a lowering bug, never user input.
void check_well_formed(const IterationGraph& graph);

}  // namespace twin
