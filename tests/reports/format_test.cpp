// Report number formatting: exact seconds from integer ns, fixed decimals without signed zeros,
// thousands grouping, and HTML escaping.
#include "reports/format.hpp"

#include <gtest/gtest.h>

namespace twin {
namespace {

TEST(Format, SecondsAreExactFromNanoseconds) {
  EXPECT_EQ(seconds_text(1234567891), "1.234567891");
  EXPECT_EQ(seconds_text(7000), "0.000007000");
  EXPECT_EQ(seconds_text(0), "0.000000000");
  EXPECT_EQ(seconds_text(-5), "-0.000000005");
  EXPECT_EQ(milliseconds_text(1234567), "1.235");
}

TEST(Format, FixedDecimalsWithoutSignedZero) {
  EXPECT_EQ(fixed(0.4312, 4), "0.4312");
  EXPECT_EQ(fixed(2.0 / 3.0, 2), "0.67");
  EXPECT_EQ(fixed(-0.0001, 2), "0.00");
  EXPECT_EQ(fixed(-1.5, 1), "-1.5");
  EXPECT_EQ(gib_text(3 * 1024LL * 1024 * 1024 / 2, 3), "1.500");
}

TEST(Format, GroupsThousands) {
  EXPECT_EQ(grouped(1234567.891), "1,234,568");
  EXPECT_EQ(grouped(999), "999");
  EXPECT_EQ(grouped(1000), "1,000");
  EXPECT_EQ(grouped(-1234), "-1,234");
  EXPECT_EQ(grouped(0), "0");
}

TEST(Format, EscapesHtml) {
  EXPECT_EQ(escape_html("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  EXPECT_EQ(escape_html("plain"), "plain");
}

}  // namespace
}  // namespace twin
