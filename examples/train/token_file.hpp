// A fresh cluster token in a file only this user can read: handed to the
// children of bamboo-train --processes, or to bamboo-inspect for an embedded
// run's --inspect-port (never in an environment, which others may see through
// /proc on some systems and which every grandchild inherits). Beside it, a
// fresh operator token: bamboo-inspect needs it for commands.
#pragma once

#include <memory>
#include <string>

namespace bamboo::app {

class token_file {
public:
  // A private directory (0700) under $XDG_RUNTIME_DIR when set (else the
  // temporary directory) with both tokens (0600). Removed by the destructor,
  // and by SIGTERM, SIGINT or SIGHUP where this process has no handler of its
  // own for them (the signal then ends the process as it would have).
  // Given tokens (the user's) are written instead of fresh ones.
  explicit token_file(const std::string& token = {},
                      const std::string& operator_token = {});
  ~token_file();
  token_file(const token_file&) = delete;
  token_file& operator=(const token_file&) = delete;
  // Empty when it could not be written.
  const std::string& path() const { return path_; }
  const std::string& token() const { return token_; }
  const std::string& operator_path() const { return operator_path_; }
  const std::string& operator_token() const { return operator_token_; }
  const std::string& dir() const { return dir_; }
  // The cluster token is the user's, not one made for this run.
  bool user_given() const { return user_given_; }

private:
  std::string dir_, path_, token_, operator_path_, operator_token_;
  bool user_given_ = false;
};

// Removes every live token_file's files now (async-signal-safe: for a signal
// handler that ends the process at once).
void remove_token_files_now();

// A run's tokens: the user's where given (a file, else $BAMBOO_TOKEN and
// $BAMBOO_OPERATOR_TOKEN), fresh ones else, written to a token_file that the
// run's children and bamboo-inspect read. Null after printing why.
std::unique_ptr<token_file> run_tokens(const std::string& token_path,
                                       const std::string& operator_path);

} // namespace bamboo::app
