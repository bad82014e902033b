// Writing gzip (RFC 1952, through zlib) as the text is written: a Chrome trace of millions of events is compressed
// without being held whole. The header carries no time and no file name, so the same text gives the same bytes.
#pragma once
#include <memory>
#include <ostream>

namespace twin {

class GzipOstream : public std::ostream {
 public:
  // Compresses what is written into `sink` (which must outlive this stream).
  explicit GzipOstream(std::ostream& sink);
  ~GzipOstream() override;
  // Compresses what is left and ends the gzip member; `sink` then holds a whole .gz file. Call once, last.
  void finish();

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
};

}  // namespace twin
