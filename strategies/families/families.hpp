// Every plan family search() tries beyond the uniform strategies. The families live in folders of their
// own above the uniform search (strategies/), which knows them only through FamilySearch and FamilyPlan.
#pragma once
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// In the order search() appends their candidates: heterogeneous pipelines (HexiScale), hot switching
// (HotSPa), per-layer hybrid plans (Galvatron). Each returns nothing where it does not apply.
const std::vector<FamilySearch>& plan_families();

// Reads the family plan the scenario pins (strategy.per_layer or strategy.hot_switch), if any, as its search will: throws InputError
// at its JSON path for one its family cannot take, so that a command refuses it before writing anything.
void check_pinned_family_plan(const Scenario& scenario);

}  // namespace twin
