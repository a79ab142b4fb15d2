// How the CLI tells the user about errors: "xcargo: error: FILE: what", then "hint:" lines.
#pragma once

#include <string>

#include "xcargo/error.h"

namespace xcargo::cli {

// Prints the error (prefixed with subject, a file name, when not empty) and its hints to
// stderr and returns the exit code for it.
int report(const Error& error, const std::string& subject = "");
// A one-line notice on stderr: "xcargo: MESSAGE".
void note(const std::string& message);

}  // namespace xcargo::cli
