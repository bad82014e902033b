# Writes a C++ source that holds reports/report_script.js, the report's one script, so that report.html inlines
# it without the source tree. Run by the build (cmake -P).
#   -DOUT=<generated .cpp>  -DSCRIPT=<reports/report_script.js>
file(READ "${SCRIPT}" text)
if(text MATCHES "\\)twin_script\"" OR text MATCHES "</script")
  message(FATAL_ERROR "${SCRIPT} holds a sequence that would end its C++ string or its <script> element")
endif()
set(body "// Generated from reports/report_script.js by reports/embed_script.cmake: do not edit.\n")
string(APPEND body "#include \"reports/report_script.hpp\"\n\nnamespace twin {\n\n")
string(APPEND body "std::string_view report_script() {\n  return R\"twin_script(${text})twin_script\";\n}\n\n")
string(APPEND body "}  // namespace twin\n")
file(WRITE "${OUT}.new" "${body}")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
