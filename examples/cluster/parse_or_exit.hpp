// The command line of bamboo's programs and benchmarks, parsed alike: --help
// prints and leaves with 0, a bad option leaves with one "<program>: error: ..."
// line and status 2. Header-only, so programs that link nothing else use it.
#pragma once

#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

namespace bamboo::process {

// Parses argv; returns the exit status to leave with, or nullopt to go on.
inline std::optional<int> parse_or_exit(CLI::App& app, int argc, char** argv,
                                        const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  }
  return std::nullopt;
}

} // namespace bamboo::process
