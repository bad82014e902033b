// A streambuf that gathers text in a fixed buffer and deflates it into the sink whenever the buffer fills: memory
// stays that buffer and zlib's state (about 300 KB) whatever the length of the text.
#include "traces/gzip_stream.hpp"

#include <array>
#include <stdexcept>
#include <streambuf>

#include <zlib.h>

namespace twin {

class GzipOstream::Buffer : public std::streambuf {
 public:
  explicit Buffer(std::ostream& sink) : sink_(sink) {
    // windowBits 15 + 16: a gzip header and trailer; zlib's header has mtime 0 and no name.
    if (deflateInit2(&zlib_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("zlib: cannot start a gzip stream");
    setp(text_.data(), text_.data() + text_.size());
  }
  ~Buffer() override { deflateEnd(&zlib_); }

  void finish() {
    deflate_text(Z_FINISH);
    finished_ = true;
  }

 protected:
  int_type overflow(int_type c) override {
    if (finished_) return traits_type::eof();
    deflate_text(Z_NO_FLUSH);
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

 private:
  // Deflates the gathered text into the sink and empties the buffer; `flush` Z_FINISH ends the member.
  void deflate_text(int flush) {
    zlib_.next_in = reinterpret_cast<Bytef*>(pbase());
    zlib_.avail_in = static_cast<uInt>(pptr() - pbase());
    std::array<char, 1 << 16> out;
    int status = Z_OK;
    do {
      zlib_.next_out = reinterpret_cast<Bytef*>(out.data());
      zlib_.avail_out = static_cast<uInt>(out.size());
      status = deflate(&zlib_, flush);
      if (status == Z_STREAM_ERROR) throw std::runtime_error("zlib: deflate failed");
      sink_.write(out.data(), static_cast<std::streamsize>(out.size() - zlib_.avail_out));
    } while (zlib_.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END));
    setp(text_.data(), text_.data() + text_.size());
  }

  std::ostream& sink_;
  z_stream zlib_{};
  std::array<char, 1 << 16> text_;
  bool finished_ = false;
};

GzipOstream::GzipOstream(std::ostream& sink) : std::ostream(nullptr), buffer_(std::make_unique<Buffer>(sink)) {
  rdbuf(buffer_.get());
}

GzipOstream::~GzipOstream() = default;

void GzipOstream::finish() { buffer_->finish(); }

}  // namespace twin
