// Writing output files so that nothing half-written is ever left behind: write PATH.tmp, then rename.
#pragma once
#include <filesystem>
#include <string_view>

namespace twin {

// Throws std::runtime_error naming the path when the file cannot be written.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace twin
