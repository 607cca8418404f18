// A fresh cluster token in a file only this user can read: handed to the
// children of bamboo-train --processes, or to bamboo-inspect for an embedded
// run's --inspect-port (never in an environment, which others may see through
// /proc on some systems and which every grandchild inherits).
#pragma once

#include <string>

namespace bamboo::app {

class token_file {
public:
  token_file();  // a private directory (0700) with the token (0600)
  ~token_file(); // both removed
  token_file(const token_file&) = delete;
  token_file& operator=(const token_file&) = delete;
  // Empty when it could not be written.
  const std::string& path() const { return path_; }
  const std::string& token() const { return token_; }

private:
  std::string dir_, path_, token_;
};

} // namespace bamboo::app
