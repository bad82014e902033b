// Megatron's pipeline layout strings read as Megatron reads them (pipeline_parallel_layer_layout.py), each refusal
// saying what was expected.
#include <gtest/gtest.h>

#include "core/pipeline_layout.hpp"

namespace twin {
namespace {

PipelineLayout parsed(std::string_view text) {
  std::string error;
  std::optional<PipelineLayout> layout = parse_pipeline_layout(text, error);
  EXPECT_TRUE(layout) << text << ": " << error;
  return layout.value_or(PipelineLayout{});
}

std::string refusal(std::string_view text) {
  std::string error;
  EXPECT_FALSE(parse_pipeline_layout(text, error)) << text;
  return error;
}

TEST(PipelineLayout, DeepSeekV3OnDgxH100) {
  // Megatron-Bridge's DeepSeek-V3 recipe at PP 8, VP 4: the embedding and one layer, thirty stages of two, then the
  // MTP layer and the loss.
  const PipelineLayout layout = parsed("Et|(tt|)*30mL");
  ASSERT_EQ(layout.virtual_stages(), 32);
  EXPECT_EQ(layout.decoder_layers.front(), 1);
  for (int vs = 1; vs <= 30; ++vs) EXPECT_EQ(layout.decoder_layers[vs], 2) << vs;
  EXPECT_EQ(layout.decoder_layers.back(), 0);
  EXPECT_EQ(layout.mtp_layers.back(), 1);
  EXPECT_EQ(layout.embedding_stage, 0);
  EXPECT_EQ(layout.loss_stage, 31);
  EXPECT_EQ(pipeline_layout_reason(layout, 61, 1, 8, 4), std::nullopt);
  EXPECT_EQ(pipeline_layout_key(layout), "1-2x30-0-1m");
}

TEST(PipelineLayout, ExpandsGroupsThenSymbolsAsMegatron) {
  // parse_str_to_list's own examples: (ab|cd|ef)*2 repeats the group, x*n the symbol, commas are cosmetic.
  EXPECT_EQ(parsed("E,t*3|(tt|)*2,t|L").decoder_layers, (std::vector<int>{3, 2, 2, 1, 0}));
  EXPECT_EQ(parsed("(Et|)*1t|tL").decoder_layers, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(parsed("E||t|L").decoder_layers, (std::vector<int>{0, 0, 1, 0}));  // empty stages parse
  // The group ends at its first ')': "((t)*2)*3" leaves a '(' behind, as Megatron's regular expression does.
  EXPECT_NE(refusal("E((t)*2)*3|L").find("not '('"), std::string::npos);
}

TEST(PipelineLayout, RefusesWhatIsNotALayout) {
  EXPECT_NE(refusal("Et|x|L").find("a layout of E, t, m, L, '|', commas, x*n and (...)*n"), std::string::npos);
  EXPECT_NE(refusal("Et|x|L").find("not 'x'"), std::string::npos);
  EXPECT_EQ(refusal("t|tL"), "a layout with an embedding E and a loss L");
  EXPECT_EQ(refusal("EEt|L"), "a layout with one embedding E");
  EXPECT_EQ(refusal("EtL|L"), "a layout whose loss L is its last symbol (nothing after L)");
  EXPECT_EQ(refusal("Et|Lt"), "a layout whose loss L is its last symbol (nothing after L)");
  EXPECT_EQ(refusal("tE|tL"), "a layout whose embedding E comes first in its virtual stage");
  EXPECT_EQ(refusal("Etm|tL"), "a layout whose MTP layers m follow every transformer layer t");
  EXPECT_EQ(refusal("E(t)*99999999L"), "a layout of at most 65536 symbols once its repeats are expanded");
  EXPECT_EQ(refusal("Et*99999999999999999999999L"), "a layout of at most 65536 symbols once its repeats are expanded");
}

TEST(PipelineLayout, SaysWhyALayoutDoesNotFitTheModel) {
  const PipelineLayout deepseek = parsed("Et|(tt|)*30mL");
  EXPECT_EQ(pipeline_layout_reason(deepseek, 61, 1, 8, 2),
            "pipeline_model_parallel_layout has 32 virtual stages, not pipeline_model_parallel_size*"
            "virtual_pipeline_model_parallel_size 16");
  EXPECT_EQ(pipeline_layout_reason(deepseek, 60, 1, 8, 4),
            "pipeline_model_parallel_layout places 61 transformer layers t, not num_layers 60");
  EXPECT_EQ(pipeline_layout_reason(deepseek, 61, 0, 8, 4),
            "pipeline_model_parallel_layout places 1 MTP layers m, not mtp_num_layers 0");
  // Megatron's documentation example: MTP in a stage of its own before the loss (its "standalone" MTP).
  EXPECT_EQ(pipeline_layout_reason(parsed("Et*3|(tt|)*29,m|L"), 61, 1, 16, 2),
            "pipeline_model_parallel_layout puts MTP layers m in virtual stage 30: twin lowers them beside the loss "
            "L only (Megatron's standalone MTP stage is not modelled)");
  EXPECT_EQ(pipeline_layout_reason(parsed("Et||tL"), 2, 0, 3, 1),
            "pipeline_model_parallel_layout leaves virtual stage 1 empty: twin lowers no empty virtual stage");
  EXPECT_EQ(pipeline_layout_reason(parsed("|EttL"), 2, 0, 2, 1),
            "pipeline_model_parallel_layout puts the embedding E in virtual stage 1: twin places it in the first");
  // A loss before the last virtual stage is refused as it is read: nothing follows L.
  EXPECT_EQ(refusal("EttL|"), "a layout whose loss L is its last symbol (nothing after L)");
}

}  // namespace
}  // namespace twin
