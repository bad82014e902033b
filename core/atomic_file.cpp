// rename(2) within one directory is atomic on POSIX: readers see the old file or the whole new one.
#include "core/atomic_file.hpp"

#include <fstream>
#include <stdexcept>
#include <string>

namespace twin {

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + temporary.string());
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(temporary);
      throw std::runtime_error("cannot write " + temporary.string() + " (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary);
    throw std::runtime_error("cannot rename " + temporary.string() + " to " + path.string() + ": " + error.message());
  }
}

}  // namespace twin
