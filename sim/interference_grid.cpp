// A row is (collective kind, bucket of its bytes clamped to the kind's measured sizes); a band is (compute class,
// bucket of one kernel's waves clamped to the measured GEMMs'), the memory-bound kinds one band. Each grid entry is
// the profile's pair read at the buckets' centres; a kind or class without points takes the scalars.
#include "sim/interference_grid.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace twin::sim {
namespace {

constexpr double kBucketsPerOctave = 4;
constexpr int kBucketSlots = 512;
constexpr int kBucketOffset = 256;  // waves below 1 have negative buckets
constexpr std::uint8_t kUnused = 255;

int bucket_of(double value) { return static_cast<int>(std::lround(kBucketsPerOctave * std::log2(value))); }
double centre_of(int bucket) { return std::exp2(bucket / kBucketsPerOctave); }

// The bytes range measured for `kind`, or {0, 0}.
std::array<double, 2> size_range(const std::vector<InterferencePoint>& points, OpKind kind) {
  std::array<double, 2> range{0, 0};
  for (const InterferencePoint& p : points) {
    if (p.collective != kind) continue;
    const double size = static_cast<double>(p.size_bytes);
    range = range[1] == 0 ? std::array<double, 2>{size, size}
                          : std::array<double, 2>{std::min(range[0], size), std::max(range[1], size)};
  }
  return range;
}

}  // namespace

InterferenceIndex::InterferenceIndex(const OverlapProfile& overlap) : overlap_(overlap), measured_(!overlap.points.empty()) {
  if (!measured_) return;  // every op row 0 and band 0: nothing to index (a search flattens thousands of iterations)
  for (const InterferencePoint& p : overlap.points) {
    if (p.beside != InterferenceCompute::gemm) continue;
    waves_range_ = waves_range_[1] == 0 ? std::array<double, 2>{p.gemm_waves, p.gemm_waves}
                                        : std::array<double, 2>{std::min(waves_range_[0], p.gemm_waves),
                                                                std::max(waves_range_[1], p.gemm_waves)};
  }
  const std::size_t kinds = static_cast<std::size_t>(kLastOpKind) + 1;
  row_table_.assign(kinds * kBucketSlots, kUnused);
  size_ranges_.resize(kinds);
  for (std::size_t k = 0; k < kinds; ++k) size_ranges_[k] = size_range(overlap.points, static_cast<OpKind>(k));
  band_table_.assign(kinds * kBucketSlots, kUnused);
}

std::uint8_t InterferenceIndex::index_of(std::vector<Key>& keys, std::vector<std::uint8_t>& table, Key key) {
  const int slot = std::clamp(key.bucket + kBucketOffset, 0, kBucketSlots - 1);
  std::uint8_t& index = table[static_cast<std::size_t>(key.kind) * kBucketSlots + slot];
  if (index != kUnused) return index;
  if (keys.size() >= kUnused) throw std::logic_error("interference grid: more than 254 rows or bands");
  keys.push_back(key);
  index = static_cast<std::uint8_t>(keys.size() - 1);
  return index;
}

std::uint8_t InterferenceIndex::row_of(const Op& op) {
  if (!measured_) return 0;
  const OpKind kind = interference_collective(op.kind).value_or(OpKind::all_reduce);
  const std::array<double, 2>& range = size_ranges_[static_cast<std::size_t>(kind)];
  const double bytes = range[1] > 0 ? std::clamp(static_cast<double>(std::max<Bytes>(op.bytes, 1)), range[0], range[1])
                                    : 1.0;
  return index_of(rows_, row_table_, {kind, bucket_of(bytes)});
}

std::uint8_t InterferenceIndex::band_of(const Op& op) {
  if (!measured_) return 0;
  const double waves = interference_waves(op, sm_count_);
  if (!(waves > 0) || waves_range_[1] == 0) return index_of(bands_, band_table_, {OpKind::elementwise, 0});
  return index_of(bands_, band_table_, {OpKind::gemm, bucket_of(std::clamp(waves, waves_range_[0], waves_range_[1]))});
}

InterferenceGrid InterferenceIndex::grid() const {
  InterferenceGrid grid;
  const std::size_t rows = std::max<std::size_t>(rows_.size(), 1), bands = std::max<std::size_t>(bands_.size(), 1);
  grid.bands = static_cast<int>(bands);
  grid.compute_slowdown.assign(rows * bands, overlap_.compute_slowdown);
  grid.communication_slowdown.assign(rows * bands, overlap_.communication_slowdown);
  grid.several_rows = rows > 1;
  for (std::size_t r = 0; r < rows_.size(); ++r)
    for (std::size_t b = 0; b < bands_.size(); ++b) {
      const bool gemm = bands_[b].kind == OpKind::gemm;
      const std::optional<InterferenceFactors> f = measured_interference(
          overlap_.points, rows_[r].kind, centre_of(rows_[r].bucket),
          gemm ? InterferenceCompute::gemm : InterferenceCompute::memory_bound, gemm ? centre_of(bands_[b].bucket) : 0);
      if (!f) continue;  // the scalars
      grid.compute_slowdown[r * bands + b] = f->compute_slowdown;
      grid.communication_slowdown[r * bands + b] = f->communication_slowdown;
    }
  grid.any_communication_slowdown =
      std::any_of(grid.communication_slowdown.begin(), grid.communication_slowdown.end(), [](double s) { return s != 1.0; });
  return grid;
}

}  // namespace twin::sim
