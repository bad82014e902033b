// GzipOstream: what is written comes back whole from gunzip (texts longer than its buffer included), the same
// text gives the same bytes, and an empty text is a valid empty member.
#include "traces/gzip_stream.hpp"

#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <zlib.h>

namespace twin {
namespace {

std::string gzip(const std::string& text) {
  std::ostringstream file;
  GzipOstream compressed(file);
  compressed << text;
  compressed.finish();
  return file.str();
}

std::string gunzip(const std::string& compressed) {
  z_stream zlib{};
  EXPECT_EQ(inflateInit2(&zlib, 15 + 16), Z_OK);
  zlib.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zlib.avail_in = static_cast<uInt>(compressed.size());
  std::string text;
  char out[4096];
  int status = Z_OK;
  while (status == Z_OK) {
    zlib.next_out = reinterpret_cast<Bytef*>(out);
    zlib.avail_out = sizeof out;
    status = inflate(&zlib, Z_NO_FLUSH);
    text.append(out, sizeof out - zlib.avail_out);
  }
  inflateEnd(&zlib);
  EXPECT_EQ(status, Z_STREAM_END);
  return text;
}

TEST(GzipOstream, GivesBackWhatWasWrittenAndTheSameBytesEveryTime) {
  std::string text;
  for (int event = 0; event < 20000; ++event)  // about 700 KB: ten times the stream's buffer
    text += "{\"name\":\"gemm\",\"ph\":\"X\",\"ts\":" + std::to_string(event * 37) + "},\n";
  const std::string compressed = gzip(text);
  EXPECT_EQ(compressed.substr(0, 3), "\x1f\x8b\x08");  // gzip, deflate
  EXPECT_EQ(compressed.substr(4, 4), std::string(4, '\0'));  // no time in the header
  EXPECT_LT(compressed.size() * 5, text.size());
  EXPECT_EQ(gunzip(compressed), text);
  EXPECT_EQ(gzip(text), compressed);
  EXPECT_EQ(gunzip(gzip("")), "");
}

}  // namespace
}  // namespace twin
