# Writes a C++ source that holds the measured profiles of cost/profiles/*.json, so that
# `twin simulate --profile NAME` finds them without the source tree. Run by the build (cmake -P).
#   -DOUT=<generated .cpp>  -DPROFILE_DIR=<cost/profiles>
file(GLOB files "${PROFILE_DIR}/*.json")
list(SORT files)
set(body "// Generated from cost/profiles/*.json by cost/embed_profiles.cmake: do not edit.\n")
string(APPEND body "#include \"cost/shipped_profiles.hpp\"\n\nnamespace twin {\n\n")
string(APPEND body "const std::vector<ShippedProfile>& shipped_profiles() {\n  static const std::vector<ShippedProfile> all = {\n")
foreach(file ${files})
  get_filename_component(name "${file}" NAME_WE)
  file(READ "${file}" text)
  string(APPEND body "      {\"${name}\", R\"twin_profile(${text})twin_profile\"},\n")
endforeach()
string(APPEND body "  };\n  return all;\n}\n\n}  // namespace twin\n")
file(WRITE "${OUT}.new" "${body}")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
