// The lines twin prints for errors, formatted in one place (core/error.cpp, beside InputError, which escapes
// its parts the same way): control bytes from the input never reach the terminal nor split the line.
#pragma once
#include <exception>
#include <string>
#include <string_view>

namespace twin {

// `text` on one line: a newline, tab or carriage return as \n, \t, \r, any other control byte (a NUL, an
// escape sequence's ESC, DEL) as \xHH. Other bytes, backslashes included, are kept as they are.
std::string printable_line(std::string_view text);

// The line a command prints for the error that ended it: the message on one line, never empty.
std::string error_line(const std::exception& error);

}  // namespace twin
