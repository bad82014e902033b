// validation.csv and validation.md of a cross-validation (fixed decimals: the same table and profile give the
// same bytes).
#include <fmt/format.h>

#include "core/text_format.hpp"
#include "validation/cross_validation.hpp"

namespace twin {

namespace {

// A parameter's value in a fold, as the outputs write it.
std::string value_text(const ParameterFit& fit) {
  return fit.value ? fixed(*fit.value, 4) : "benchmark (" + fit.no_fit_reason + ")";
}

// "ampere_in_training=1.1650;hopper_in_training=1.3801": the parameters of a fold.
std::string fold_text(const CrossValidation& cv, const FoldFits& fold) {
  std::string out;
  for (std::size_t p = 0; p < cv.parameters.size(); ++p)
    out += fmt::format("{}{}={}", p ? ";" : "", cv.parameters[p].name,
                       fold.fits[p].value ? fixed(*fold.fits[p].value, 4) : "benchmark");
  return out;
}

std::string summary_table(const CrossValidation& cv) {
  std::string out =
      "| group | rows | cross-validated mean \\|error\\| | max \\|error\\| | mean error | in-sample mean \\|error\\| "
      "| max \\|error\\| | mean error | built-in values mean \\|error\\| | max \\|error\\| |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  const std::vector<GroupSummary> held_out = summarize(cv.held_out), fitted = summarize(cv.fitted),
                                  builtin = summarize(cv.at_builtin);
  for (std::size_t g = 0; g < held_out.size(); ++g) {
    const GroupSummary &h = held_out[g], &f = fitted[g], &b = builtin[g];
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", h.group == "all" ? "**all**" : h.group,
                       h.rows, percent(h.mean_abs_error), percent(h.max_abs_error), percent(h.mean_error),
                       percent(f.mean_abs_error), percent(f.max_abs_error), percent(f.mean_error),
                       percent(b.mean_abs_error), percent(b.max_abs_error));
  }
  return out;
}

// "| a | b |": one line of a Markdown table.
std::string table_line(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& cell : cells) out += " " + cell + " |";
  return out + "\n";
}

std::string parameters_table(const CrossValidation& cv, const PublishedTable& table) {
  std::vector<std::string> header = {"fitted without"}, rule = {"---"};
  for (const FittedParameter& p : cv.parameters) {
    header.push_back(fmt::format("{} ({})", p.name, p.gpus));
    rule.push_back("---");
  }
  std::string out = table_line(header) + table_line(rule);
  for (const FoldFits& fold : cv.folds) {
    std::vector<std::string> cells = {fold.held_out};
    for (std::size_t p = 0; p < cv.parameters.size(); ++p) {
      const bool matters = group_uses(cv, table, fold.held_out, static_cast<int>(p));
      cells.push_back(fold.fits[p].value || matters ? value_text(fold.fits[p]) : "—");
    }
    out += table_line(cells);
  }
  std::vector<std::string> in_sample = {"nothing (in-sample)"}, builtin = {"built-in: fitted on its default groups"};
  for (const ParameterFit& fit : cv.in_sample.fits) in_sample.push_back(fit.value ? value_text(fit) : "—");
  for (const FittedParameter& p : cv.parameters) builtin.push_back(fixed(p.value, 4));
  return out + table_line(in_sample) + table_line(builtin);
}

std::string meanings_table(const CrossValidation& cv) {
  std::string out = "| parameter | GPUs | built-in value fitted on | what it stands for |\n| --- | --- | --- | --- |\n";
  for (const FittedParameter& p : cv.parameters) {
    std::string groups;
    for (const std::string& g : p.fit_groups) groups += (groups.empty() ? "" : ", ") + g;
    out += fmt::format("| {} | {} | {} | {} |\n", p.name, p.gpus, groups, p.meaning);
  }
  return out;
}

std::string rows_table(const CrossValidation& cv) {
  std::string out = "| row | published s | cross-validated s | error | in-sample s | error | best candidate "
                    "(cross-validated, of N) |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  for (std::size_t i = 0; i < cv.held_out.size(); ++i) {
    const RowPrediction &h = cv.held_out[i], &f = cv.fitted[i];
    const auto time = [](const RowPrediction& r) { return r.feasible ? fixed(r.predicted_s, 3) : "—"; };
    const auto error = [](const RowPrediction& r) { return r.feasible ? percent(r.error) : "—"; };
    const std::string best =
        h.feasible ? fmt::format("`{}` ({})", h.best, h.candidates) : "no feasible candidate: " + h.reason;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", h.row->id, fixed(h.row->published_iteration_s, 3),
                       time(h), error(h), time(f), error(f), best);
  }
  return out;
}

}  // namespace

std::string cross_validation_csv(const CrossValidation& cv) {
  std::string out = validation_csv_header() + ",in_sample_iteration_s,in_sample_error,fold\n";
  for (std::size_t i = 0; i < cv.held_out.size(); ++i) {
    const RowPrediction &h = cv.held_out[i], &f = cv.fitted[i];
    out += fmt::format("{},{},{},{}\n", validation_csv_line(h), f.feasible ? fixed(f.predicted_s, 4) : "",
                       f.feasible ? fixed(f.error, 4) : "", csv_field(fold_text(cv, fold_of(cv, h.row->group))));
  }
  return out;
}

std::string cross_validation_markdown(const CrossValidation& cv, const PublishedTable& table,
                                      const std::string& profile_name) {
  std::string out = fmt::format(
      "Profile: `{}`. Error = predicted / published iteration time - 1 (negative: twin predicts too fast). "
      "Cross-validated: each group predicted with every fitted parameter refitted on the other groups' rows "
      "(leave one group out); in-sample: every parameter fitted on all its rows; built-in values: as the "
      "built-in profile ships them.\n\n",
      profile_name);
  out += summary_table(cv);
  out += "\n";
  out += meanings_table(cv);
  out += "\nThe fitted parameters' values in each fold (the group left out is the one predicted with them; "
         "benchmark: factor 1, nothing to fit on):\n\n";
  out += parameters_table(cv, table);
  out += "\n";
  out += rows_table(cv);
  return out;
}

}  // namespace twin
