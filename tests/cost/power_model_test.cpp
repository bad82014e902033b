// The power model (cost/power_model.hpp): a step's power at a clock, the clock where it meets the cap (against the
// closed-form root of a step whose power is a cubic in the clock), the maximum clock under the cap, and the
// profile's "power_model" key read, written back and refused at its JSON path.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cost/power_model.hpp"
#include "cost/profile.hpp"

namespace twin {
namespace {

PowerModel model() { return {100, 1.0, 50, 2.0, 2000, 700}; }

// One second of GEMMs at 1,800 MHz doing 700 TFLOP/s: at f, 700 x f / 1800 TFLOP/s and nothing else.
StepWork gemms_only() { return {1e9, 0, 1800, 700e12, 0}; }

TEST(PowerModel, StepPowerIsStaticPlusWorkPerSecondScaledByTheClock) {
  // At 1,800 MHz: 100 + (0.9)^2 x 1.0 pJ x 700e12 /s = 667 W.
  EXPECT_NEAR(step_power_W(model(), gemms_only(), 1800), 100 + 0.81 * 700, 1e-9);
  // Half the time in memory-bound kernels moving 2e12 bytes: at 2,000 MHz the GEMMs take 0.9 s of 1.9 s.
  const StepWork mixed{1e9, 1e9, 1800, 700e12, 2e12};
  EXPECT_NEAR(step_power_W(model(), mixed, 2000), 100 + (700 + 50 * 2) / 1.9, 1e-9);
  EXPECT_EQ(step_power_W(model(), StepWork{}, 1500), 0);  // no busy time
}

TEST(PowerModel, TheClockWherePowerMeetsTheCapOrTheMaximum) {
  // 100 + 700 (f/2000)^2 (f/1800) = 700: f^3 = 600/700 x 2000^2 x 1800.
  EXPECT_NEAR(power_limited_clock_MHz(model(), gemms_only()), std::cbrt(600.0 / 700 * 2000 * 2000 * 1800), 0.02);
  StepWork light = gemms_only();
  light.flops /= 2;  // 100 + 350 x (f/2000)^2 (f/1800) stays under 700 W up to 2,000 MHz
  EXPECT_EQ(power_limited_clock_MHz(model(), light), 2000);
  PowerModel low_cap = model();
  low_cap.power_cap_W = 90;  // under the static draw: the lowest clock
  EXPECT_EQ(power_limited_clock_MHz(low_cap, gemms_only()), 1);
}

nlohmann::json profile_with(const nlohmann::json& power) {
  Profile p = builtin_profile();
  p.builtin = false;
  p.gpus.resize(1);
  p.gpus[0].measured.clear();
  p.collectives.clear();
  nlohmann::json document = to_json(p);
  document["gpus"][0]["power_model"] = power;
  return document;
}

// The JSON path of the InputError reading `power` as the first GPU's power model gives ("" when it reads).
std::string error_path(const nlohmann::json& power) {
  try {
    profile_from_json(profile_with(power), "test");
  } catch (const InputError& e) {
    return e.json_path();
  }
  return "";
}

TEST(PowerModelKey, RoundTripsAndIsAbsentWhereNotMeasured) {
  Profile p = builtin_profile();
  EXPECT_FALSE(to_json(p)["gpus"][0].contains("power_model"));
  const nlohmann::json document = profile_with(power_model_json(model()));
  const Profile read = profile_from_json(document, "test");
  EXPECT_EQ(read.gpus[0].power_model, model());
  EXPECT_EQ(to_json(read)["gpus"][0]["power_model"], power_model_json(model()));
}

TEST(PowerModelKey, BadValuesAreRefusedAtTheirPath) {
  EXPECT_EQ(error_path(power_model_json(model())), "");
  nlohmann::json power = power_model_json(model());
  power["clock_exponent"] = -1;
  EXPECT_EQ(error_path(power), "/gpus/0/power_model/clock_exponent");
  power = power_model_json(model());
  power.erase("pJ_per_flop");
  EXPECT_EQ(error_path(power), "/gpus/0/power_model");
  power = power_model_json(model());
  power["static_W"] = 800;  // above the cap
  EXPECT_EQ(error_path(power), "/gpus/0/power_model/power_cap_W");
  power = power_model_json(model());
  power["watts"] = 1;
  EXPECT_EQ(error_path(power), "/gpus/0/power_model/watts");
}

}  // namespace
}  // namespace twin
