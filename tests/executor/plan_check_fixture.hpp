// The plan check's tests' reading of a plan: a recorded run's plan (one GPU, dense Llama-style model: twin execute
// ran it) and the JSON path at which the check refuses a plan.
#pragma once
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "executor/plan_check.hpp"
#include "tests/reports/execution_fixture.hpp"

namespace twin::exec::testing_plan_check {

inline const std::string kFile = "runs/best.json";

inline Plan executed_plan() { return read_plan(testing::executed_fixture("small-single-h200") / "best.json"); }

// The JSON path of the refusal, or "" when the plan passes.
inline std::string refusal_path(const Plan& plan) {
  try {
    check_executable_plan(plan, kFile);
    return "";
  } catch (const InputError& error) {
    EXPECT_EQ(error.file(), kFile);
    return error.json_path();
  }
}

}  // namespace twin::exec::testing_plan_check
