// RFC 4180 records (quoted fields, CRLF or LF line ends) read from a stream one at a time, so that a reader's
// memory is one record whatever the size of its file: a field or record beyond the stated limits is an error,
// not a larger buffer.
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace twin {

inline constexpr std::size_t kMaxCsvFieldBytes = 64 * 1024;
inline constexpr std::size_t kMaxCsvFields = 256;

struct CsvRecord {
  int line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

class CsvRecordReader {
 public:
  // Reads `in` (named `source` in errors) up to `max_bytes`.
  CsvRecordReader(std::istream& in, std::string source, std::uintmax_t max_bytes);

  // The next record into `record`; false at the end of the input. Throws InputError (source, "line N") for a
  // quote left open at the end, a field of more than kMaxCsvFieldBytes, a record of more than kMaxCsvFields
  // fields, input beyond `max_bytes` or a read error.
  bool next(CsvRecord& record);

 private:
  static constexpr int kEnd = -1;
  int get();
  int peek();
  void append(std::string& field, char c) const;
  void end_field(CsvRecord& record, std::string& field) const;

  std::istream& in_;
  std::string source_;
  std::uintmax_t max_bytes_;
  std::uintmax_t consumed_bytes_ = 0;
  std::vector<char> buffer_;
  std::size_t position_ = 0, filled_ = 0;
  int line_ = 1;
};

}  // namespace twin
