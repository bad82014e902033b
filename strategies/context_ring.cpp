#include "strategies/context_ring.hpp"

#include <stdexcept>
#include <string>

namespace twin {

RingPayload ring_payload(int cp, int step, bool backward) {
  const int last = backward ? cp : cp - 2;
  if (cp < 2 || step < 0 || step > last)
    throw std::invalid_argument("ring_payload: exchange " + std::to_string(step) + " of a ring of " +
                                std::to_string(cp) + (backward ? " (backward)" : " (forward)"));
  return {step <= cp - 2, backward && step >= 1};
}

}  // namespace twin
