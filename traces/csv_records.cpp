// A character at a time from a block buffer; the states are those of the whole-text reader this replaced
// (a field opens a quote only when empty, "" inside quotes is one quote, a lone CR is text).
#include "traces/csv_records.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {

CsvRecordReader::CsvRecordReader(std::istream& in, std::string source, std::uintmax_t max_bytes)
    : in_(in), source_(std::move(source)), max_bytes_(max_bytes), buffer_(std::size_t{1} << 16) {}

int CsvRecordReader::peek() {
  if (position_ == filled_) {
    if (!in_) return kEnd;
    in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    if (in_.bad()) throw InputError(source_, fmt::format("line {}", line_), "expected a file that can be read to its end");
    position_ = 0;
    filled_ = static_cast<std::size_t>(in_.gcount());
    if (filled_ == 0) return kEnd;
  }
  return static_cast<unsigned char>(buffer_[position_]);
}

int CsvRecordReader::get() {
  const int c = peek();
  if (c == kEnd) return c;
  ++position_;
  if (++consumed_bytes_ > max_bytes_)
    throw InputError(source_, fmt::format("line {}", line_),
                     fmt::format("expected a file of at most {} bytes (it grew while read)", max_bytes_));
  return c;
}

void CsvRecordReader::append(std::string& field, char c) const {
  if (field.size() >= kMaxCsvFieldBytes)
    throw InputError(source_, fmt::format("line {}", line_), fmt::format("expected fields of at most {} bytes", kMaxCsvFieldBytes));
  field += c;
}

void CsvRecordReader::end_field(CsvRecord& record, std::string& field) const {
  if (record.fields.size() >= kMaxCsvFields)
    throw InputError(source_, fmt::format("line {}", record.line), fmt::format("expected at most {} fields", kMaxCsvFields));
  record.fields.push_back(std::move(field));
  field.clear();
}

bool CsvRecordReader::next(CsvRecord& record) {
  record.line = line_;
  record.fields.clear();
  std::string field;
  bool quoted = false, field_started = false;
  for (int c = get(); c != kEnd; c = get()) {
    if (quoted) {
      if (c == '"' && peek() == '"') {
        get();
        append(field, '"');
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line_;
        append(field, static_cast<char>(c));
      }
      continue;
    }
    if (c == '"' && field.empty()) {
      quoted = field_started = true;
    } else if (c == ',') {
      end_field(record, field);
      field_started = true;
    } else if (c == '\r' && peek() == '\n') {
      continue;  // the '\n' ends the record
    } else if (c == '\n') {
      ++line_;
      end_field(record, field);
      return true;
    } else {
      append(field, static_cast<char>(c));
      field_started = true;
    }
  }
  if (quoted) throw InputError(source_, fmt::format("line {}", record.line), "a closing quote before the end of the file");
  if (!field_started && field.empty() && record.fields.empty()) return false;
  end_field(record, field);
  return true;
}

}  // namespace twin
