// CsvRecordReader: RFC 4180 records one at a time, with the limits that bound a reader's memory.
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "traces/csv_records.hpp"

namespace twin {
namespace {

std::vector<CsvRecord> all_records(const std::string& text, std::uintmax_t max_bytes = 1 << 20) {
  std::istringstream in(text);
  CsvRecordReader reader(in, "f.csv", max_bytes);
  std::vector<CsvRecord> out;
  CsvRecord record;
  while (reader.next(record)) out.push_back(record);
  return out;
}

std::string error_of(const std::string& text, std::uintmax_t max_bytes = 1 << 20) {
  try {
    all_records(text, max_bytes);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

TEST(CsvRecords, QuotedFieldsLineEndsAndLineNumbers) {
  const std::vector<CsvRecord> records = all_records("a,\"b,\"\"c\"\"\r\nd\",e\r\n\nf\rg,\n\"h\"");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].line, 1);
  EXPECT_EQ(records[0].fields, (std::vector<std::string>{"a", "b,\"c\"\r\nd", "e"}));
  EXPECT_EQ(records[1].line, 3);  // a blank line is one empty field
  EXPECT_EQ(records[1].fields, (std::vector<std::string>{""}));
  EXPECT_EQ(records[2].line, 4);
  EXPECT_EQ(records[2].fields, (std::vector<std::string>{"f\rg", ""}));  // a lone CR is text
  EXPECT_EQ(records[3].fields, (std::vector<std::string>{"h"}));         // no line end at the end
  EXPECT_TRUE(all_records("").empty());
}

TEST(CsvRecords, RefusesWhatWouldGrowWithoutBound) {
  EXPECT_NE(error_of("a,\"open\n").find("f.csv: at line 1: a closing quote before the end of the file"), std::string::npos)
      << error_of("a,\"open\n");
  const std::string long_field(kMaxCsvFieldBytes + 1, 'x');
  EXPECT_NE(error_of("a\n" + long_field).find("line 2: expected fields of at most 65536 bytes"), std::string::npos)
      << error_of("a\n" + long_field).substr(0, 200);
  const std::string many_fields(kMaxCsvFields, ',');
  EXPECT_NE(error_of(many_fields).find("line 1: expected at most 256 fields"), std::string::npos)
      << error_of(many_fields).substr(0, 200);
  EXPECT_NE(error_of("a,b\nc,d\n", 5).find("expected a file of at most 5 bytes"), std::string::npos)
      << error_of("a,b\nc,d\n", 5);
  EXPECT_EQ(error_of("a,b\nc,d\n", 8), "no error");
}

}  // namespace
}  // namespace twin
