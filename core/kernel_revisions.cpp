#include "core/kernel_revisions.hpp"

#include <string>

#include "core/op_kinds.hpp"

namespace twin {

nlohmann::json executor_kernel_revisions_json() {
  nlohmann::json revisions = nlohmann::json::object();
  for (int k = 0; k < kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    if (op_kind_traits(kind).executor_runs)
      revisions[std::string(op_kind_traits(kind).name)] = op_kind_traits(kind).kernel_revision;
  }
  return revisions;
}

int recorded_kernel_revision(const nlohmann::json& revisions, OpKind kind) {
  if (!revisions.is_object()) return 1;
  const auto found = revisions.find(std::string(op_kind_traits(kind).name));
  return found != revisions.end() && found->is_number_integer() ? found->get<int>() : 1;
}

}  // namespace twin
