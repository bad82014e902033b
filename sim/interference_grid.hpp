// The profile's interference (cost/interference.hpp) laid out for the event loop: every NCCL communication op of a
// flattened iteration carries a row (its collective kind and size), every compute op a band (its compute class and
// one kernel's waves), and the grid holds both slowdowns for each (row, band) the iteration uses. Sizes and waves
// are bucketed at a quarter of an octave inside the measured range (a fraction of a percent of a slowdown), so that
// a long iteration needs a few dozen rows and bands. Without measured points there is one row and one band: the
// profile's two scalars, as before.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/op.hpp"
#include "cost/profile.hpp"

namespace twin::sim {

struct InterferenceGrid {
  int bands = 1;
  std::vector<double> compute_slowdown{1.0};        // rows x bands
  std::vector<double> communication_slowdown{1.0};  // rows x bands
  bool any_communication_slowdown = false;          // some entry != 1: compute starting or ending re-rates flows
  bool several_rows = false;                        // a second collective beside the first may change compute's rate

  double compute(std::uint8_t row, std::uint8_t band) const { return compute_slowdown[row * bands + band]; }
  double communication(std::uint8_t row, std::uint8_t band) const {
    return communication_slowdown[row * bands + band];
  }
};

// Gives ops their row or band while a flattening reads them, and makes the grid once it has.
class InterferenceIndex {
 public:
  explicit InterferenceIndex(const OverlapProfile& overlap);
  // The SMs of the GPUs whose ops are read next (a class's: its waves count them).
  void set_sm_count(int sm_count) { sm_count_ = sm_count; }
  // A communication op's row, a compute op's band (0 for everything without measured points).
  std::uint8_t row_of(const Op& op);
  std::uint8_t band_of(const Op& op);
  InterferenceGrid grid() const;

 private:
  struct Key {
    OpKind kind;
    int bucket;  // quarter-octaves of bytes or waves (memory-bound: 0)
  };
  // The index of `key`, numbered in order of first use (a table by kind and bucket: flattening asks once per op).
  std::uint8_t index_of(std::vector<Key>& keys, std::vector<std::uint8_t>& table, Key key);

  const OverlapProfile& overlap_;
  bool measured_ = false;
  int sm_count_ = 0;
  std::vector<Key> rows_, bands_;
  std::vector<std::uint8_t> row_table_, band_table_;  // by kind and bucket; 255: not yet used
  std::vector<std::array<double, 2>> size_ranges_;   // by collective kind: the sizes measured, smallest and largest
  std::array<double, 2> waves_range_{};  // the GEMM points' waves, smallest and largest
};

}  // namespace twin::sim
