// Writing output files so that nothing half-written is ever left behind: write PATH.tmp, then rename.
#pragma once
#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace twin {

// Throws std::runtime_error naming the path when the file cannot be written.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);
// As above, the content written by `write` as it goes (a file too large to hold in memory whole).
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace twin
