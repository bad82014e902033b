// rename(2) within one directory is atomic on POSIX: readers see the old file or the whole new one.
#include "core/atomic_file.hpp"

#include <fstream>
#include <stdexcept>
#include <string>

#include "core/output_folder.hpp"

namespace twin {

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  write_file_atomically(path, [&](std::ostream& out) {
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  });
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  register_temporary(temporary);  // removed if the process is interrupted before the rename
  struct Unregister {
    const std::filesystem::path& path;
    ~Unregister() { unregister_temporary(path); }
  } unregister{temporary};
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + temporary.string());
    try {
      write(out);
    } catch (...) {
      out.close();
      std::filesystem::remove(temporary);
      throw;
    }
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
