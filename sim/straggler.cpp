// Blom (1958) places the expected k-th order statistic of n normals at the quantile (k - 0.375) / (n + 0.25);
// the largest is k = n. Boost.Math gives the quantile.
#include "sim/straggler.hpp"

#include <boost/math/distributions/normal.hpp>

namespace twin::sim {

double expected_largest_of_normals(int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  return boost::math::quantile(boost::math::normal_distribution<double>(), (n - 0.375) / (n + 0.25));
}

double arrival_wait_share(double clock_spread, int ranks) {
  if (!(clock_spread > 0)) return 0;
  return clock_spread * expected_largest_of_normals(ranks);
}

}  // namespace twin::sim
