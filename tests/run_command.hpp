// Runs a shell command line and returns its exit status and its output (stdout
// and stderr together), for tests of the command-line tools.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace bamboo::test {

struct outcome {
  int status = -1; // the exit status, or 128 + the signal that ended it
  std::string output;
};

inline outcome run_command(const std::string& cmd_line) {
  outcome out;
  FILE* p = popen((cmd_line + " 2>&1").c_str(), "r");
  if (!p)
    return out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p))
    out.output += buf;
  const int st = pclose(p);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

} // namespace bamboo::test
