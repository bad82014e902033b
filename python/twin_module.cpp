// `import twin`: twin.simulate and twin.sweep, the library functions `twin simulate` and `twin sweep` call
// (pipeline/), with Python values in and out. A scenario is a dict (or a path); results hold the ranking as dict
// rows, the best plan (best.json) as a dict and the paths written. Bad input raises twin.ScenarioError, a ValueError
// carrying the file, JSON path and expectation. Logging goes to stderr, warnings only unless verbose=True.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/scenario_input.hpp"
#include "pipeline/simulate_run.hpp"
#include "pipeline/sweep_run.hpp"
#include "reports/ranking_csv.hpp"
#include "reports/scaling_report.hpp"

namespace py = pybind11;

namespace twin {
namespace {

constexpr const char* kDictSource = "<scenario dict>";

// A dict goes through Python's json module, so the scenario is checked exactly as a file's text would be.
ScenarioInput scenario_input(const py::object& scenario) {
  if (py::isinstance<py::dict>(scenario)) {
    const std::string text = py::module_::import("json").attr("dumps")(scenario).cast<std::string>();
    return read_scenario_input(parse_input_json(text, kDictSource), kDictSource);
  }
  return load_scenario_input(py::module_::import("os").attr("fspath")(scenario).cast<std::string>());
}

// A cell as Python has it: "" None, "true"/"false" bool, a whole number int, a number float, else the text.
py::object typed_cell(const std::string& text) {
  if (text.empty()) return py::none();
  if (text == "true" || text == "false") return py::bool_(text == "true");
  std::size_t used = 0;
  try {
    if (text.find_first_of(".eE") == std::string::npos) {
      const long long whole = std::stoll(text, &used);
      if (used == text.size()) return py::int_(whole);
    } else {
      const double number = std::stod(text, &used);
      if (used == text.size()) return py::float_(number);
    }
  } catch (const std::exception&) {  // not a number: the text
  }
  return py::str(text);
}

py::list dict_rows(const std::vector<std::vector<std::string>>& table) {
  py::list rows;
  for (std::size_t r = 1; r < table.size(); ++r) {
    py::dict row;
    for (std::size_t c = 0; c < table[r].size(); ++c) row[py::str(table[0][c])] = typed_cell(table[r][c]);
    rows.append(row);
  }
  return rows;
}

py::object json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return py::module_::import("json").attr("loads")(text.str());
}

SimulateSettings settings_of(const std::optional<std::string>& profile, const std::filesystem::path& out, int top,
                             int jobs, bool exhaustive, bool full_replay, bool scale_profile) {
  SimulateSettings settings;
  settings.profile = profile.value_or("");
  settings.out = out;
  settings.top = top;
  settings.jobs = jobs;
  settings.exhaustive = exhaustive;
  settings.full_replay = full_replay;
  settings.scale_profile = scale_profile;
  return settings;
}

// Logs at info while `verbose`, else warnings only; back to warnings when the call ends.
class LogLevel {
 public:
  explicit LogLevel(bool verbose) { spdlog::set_level(verbose ? spdlog::level::info : spdlog::level::warn); }
  ~LogLevel() { spdlog::set_level(spdlog::level::warn); }
};

py::dict simulate(const py::object& scenario, const std::optional<std::string>& profile,
                  const std::filesystem::path& out, int top, int jobs, const std::string& plan_key, bool exhaustive,
                  bool full_replay, bool scale_profile, bool verbose) {
  const LogLevel level(verbose);
  const ScenarioInput input = scenario_input(scenario);
  SimulateSettings settings = settings_of(profile, out, top, jobs, exhaustive, full_replay, scale_profile);
  settings.plan_key = plan_key;
  SimulateOutcome outcome;
  {
    py::gil_scoped_release release;  // the search runs on its own threads and never touches Python
    outcome = simulate_scenario(input, settings);
  }
  const CostConfig* cost = input.cost ? &*input.cost : nullptr;
  py::dict results;
  std::vector<std::vector<std::string>> table = {ranking_columns(cost)};
  for (std::vector<std::string>& row : ranking_rows(outcome.scenario, outcome.ranked, cost)) table.push_back(std::move(row));
  results["ranking"] = dict_rows(table);
  const bool feasible = outcome.no_feasible_message.empty();
  results["best"] = feasible ? json_file(outcome.out / "best.json") : py::object(py::none());
  results["report"] = feasible ? py::object(py::str((outcome.out / "report.html").string())) : py::object(py::none());
  results["out"] = outcome.out.string();
  results["message"] = feasible ? py::object(py::none()) : py::object(py::str(outcome.no_feasible_message));
  return results;
}

py::dict sweep(const py::object& scenario, const std::optional<std::string>& profile, const std::filesystem::path& out,
               int top, int jobs, bool exhaustive, bool full_replay, bool scale_profile, bool verbose) {
  const LogLevel level(verbose);
  const ScenarioInput input = scenario_input(scenario);
  const SimulateSettings settings = settings_of(profile, out, top, jobs, exhaustive, full_replay, scale_profile);
  SweepOutcome outcome;
  {
    py::gil_scoped_release release;
    outcome = sweep_scenario(input, settings);
  }
  py::dict results;
  results["points"] = dict_rows(scaling_rows(outcome.fields, outcome.rows, input.cost ? &*input.cost : nullptr));
  results["scaling_csv"] = (outcome.out / "scaling.csv").string();
  results["report"] = (outcome.out / "scaling.html").string();
  results["out"] = outcome.out.string();
  return results;
}

}  // namespace
}  // namespace twin

PYBIND11_MODULE(twin, m) {
  m.doc() = "twin: a digital twin of distributed LLM training (docs/PYTHON.md)";
  // The library logs through spdlog's default logger: stderr here, never stdout.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("twin-python"));
  spdlog::set_pattern("[twin %l] %v");
  spdlog::set_level(spdlog::level::warn);

  static py::exception<twin::InputError> scenario_error(m, "ScenarioError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr raised) {
    try {
      if (raised) std::rethrow_exception(raised);
    } catch (const twin::InputError& error) {
      py::object instance = py::handle(scenario_error.ptr())(error.what());  // an instance, to carry the parts
      instance.attr("file") = error.file();
      instance.attr("json_path") = error.json_path();
      instance.attr("expected") = error.expected();
      PyErr_SetObject(scenario_error.ptr(), instance.ptr());
    }
  });

  using namespace pybind11::literals;
  m.def("simulate", &twin::simulate,
        "Simulate a scenario (a dict, or the path of a scenario JSON) as `twin simulate` does, writing `out`.\n"
        "Returns {'ranking': [row dicts, ranking.csv's columns], 'best': best.json as a dict (None if nothing is\n"
        "feasible), 'report': report.html's path (None if nothing is feasible: the folder's previous outputs stay and\n"
        "infeasible.csv holds every candidate's reason), 'out': the folder, 'message': why nothing is feasible, or None}.\n"
        "Raises twin.ScenarioError (a ValueError with .file, .json_path, .expected) for bad input.",
        "scenario"_a, "profile"_a = py::none(), "out"_a = std::filesystem::path("twin-out"), "top"_a = 3, "jobs"_a = 0,
        "plan_key"_a = "", "exhaustive"_a = false, "full_replay"_a = false, "scale_profile"_a = false,
        "verbose"_a = false);
  m.def("sweep", &twin::sweep,
        "Simulate every point of the scenario's \"sweep\" section as `twin sweep` does, writing `out`.\n"
        "Returns {'points': [scaling.csv's rows as dicts], 'scaling_csv': path, 'report': scaling.html's path,\n"
        "'out': the folder}. Raises twin.ScenarioError for bad input.",
        "scenario"_a, "profile"_a = py::none(), "out"_a = std::filesystem::path("twin-sweep"), "top"_a = 1,
        "jobs"_a = 0, "exhaustive"_a = false, "full_replay"_a = false, "scale_profile"_a = false, "verbose"_a = false);
}
