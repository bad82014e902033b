// Every error is one printable line (core/error.hpp, core/error_line.hpp): control bytes in the input, a NUL
// above all (it ends a C string), are escaped before the message is made.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/error_line.hpp"

namespace twin {
namespace {

using namespace std::string_literals;

TEST(ErrorLine, ControlBytesAreEscapedAndOtherBytesKept) {
  EXPECT_EQ(printable_line("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable_line("x\0y"s), "x\\x00y");
  EXPECT_EQ(printable_line("\x1b[31mred\x7f"), "\\x1b[31mred\\x7f");
  EXPECT_EQ(printable_line("C:\\path \xc3\xa9"), "C:\\path \xc3\xa9");  // backslashes and UTF-8 stay
}

TEST(ErrorLine, AnInputErrorWithANulOrNewlineIsOneWholeLine) {
  const InputError error("s.json", "/profile", "expected a profile, got \"\0\" or \"a\nb\""s);
  EXPECT_EQ(std::string(error.what()), "s.json: at /profile: expected a profile, got \"\\x00\" or \"a\\nb\"");
  EXPECT_EQ(error.expected(), "expected a profile, got \"\\x00\" or \"a\\nb\"");
}

TEST(ErrorLine, AnErrorLineIsNeverEmpty) {
  EXPECT_EQ(error_line(std::runtime_error("two\nlines")), "two\\nlines");
  EXPECT_FALSE(error_line(std::runtime_error("")).empty());
}

}  // namespace
}  // namespace twin
