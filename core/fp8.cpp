// FP8 settings: names, the layers kept in BF16, the bytes of scales.
#include "core/fp8.hpp"

#include "core/json_reader.hpp"

namespace twin {

bool layer_runs_fp8(const Fp8Config& fp8, int layer, int num_layers) {
  if (!fp8.first_last_layers_bf16) return true;
  return layer >= fp8.num_layers_at_start_in_bf16 && layer < num_layers - fp8.num_layers_at_end_in_bf16;
}

double fp8_scale_bytes(Fp8Recipe recipe, double elements) {
  switch (recipe) {
    case Fp8Recipe::delayed:
    case Fp8Recipe::tensorwise: return 4;
    case Fp8Recipe::blockwise: return 4 * elements / 128;
    case Fp8Recipe::mxfp8: return elements / 32;
  }
  return 4;
}

Fp8Config parse_fp8(const JsonReader& r) {
  r.only_keys({"format", "recipe", "param_gather", "wgrad", "amax_history_len", "first_last_layers_bf16",
               "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"});
  Fp8Config fp8;
  fp8.format = *fp8_format_from_string(r.required("format").one_of(fp8_format_names(), "FP8 format"));
  if (auto f = r.find("recipe")) fp8.recipe = *fp8_recipe_from_string(f->one_of(fp8_recipe_names(), "FP8 recipe"));
  if (auto f = r.find("param_gather")) fp8.param_gather = f->boolean();
  if (auto f = r.find("wgrad")) fp8.wgrad = f->boolean();
  if (auto f = r.find("amax_history_len")) {
    if (fp8.recipe != Fp8Recipe::delayed) f->fail("expected no amax_history_len but with recipe \"delayed\"");
    fp8.amax_history_len = static_cast<int>(f->integer(1, 1 << 20));
  }
  if (auto f = r.find("first_last_layers_bf16")) {
    fp8.first_last_layers_bf16 = f->boolean();
    // TransformerConfig.__post_init__: "Delayed scaling does not support first / last layer in BF16."
    if (fp8.first_last_layers_bf16 && fp8.recipe == Fp8Recipe::delayed)
      f->fail("expected false with recipe \"delayed\" (Megatron: delayed scaling does not support first / last "
              "layer in BF16)");
  }
  for (const char* key : {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"})
    if (auto f = r.find(key)) {
      if (!fp8.first_last_layers_bf16) f->fail("expected it only with first_last_layers_bf16 true");
      (std::string_view(key) == "num_layers_at_start_in_bf16" ? fp8.num_layers_at_start_in_bf16
                                                               : fp8.num_layers_at_end_in_bf16) =
          static_cast<int>(f->integer(0, 1 << 20));
    }
  return fp8;
}

std::string to_string(Fp8Format format) {
  switch (format) {
    case Fp8Format::e4m3: return "e4m3";
    case Fp8Format::hybrid: return "hybrid";
  }
  return "unknown";
}

std::string to_string(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::delayed: return "delayed";
    case Fp8Recipe::tensorwise: return "tensorwise";
    case Fp8Recipe::blockwise: return "blockwise";
    case Fp8Recipe::mxfp8: return "mxfp8";
  }
  return "unknown";
}

std::vector<std::string> fp8_format_names() { return {"e4m3", "hybrid"}; }
std::vector<std::string> fp8_recipe_names() { return {"delayed", "tensorwise", "blockwise", "mxfp8"}; }

std::optional<Fp8Format> fp8_format_from_string(std::string_view name) {
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::hybrid})
    if (to_string(f) == name) return f;
  return std::nullopt;
}

std::optional<Fp8Recipe> fp8_recipe_from_string(std::string_view name) {
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::tensorwise, Fp8Recipe::blockwise, Fp8Recipe::mxfp8})
    if (to_string(r) == name) return r;
  return std::nullopt;
}

}  // namespace twin
