// A directory of its own for one test (mkdtemp), removed with everything in
// it when the test ends: no fixed /tmp names, no stale file from another run.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace bamboo::test {

// A directory of its own for one test, removed with everything in it.
class scratch_dir {
public:
  scratch_dir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "bamboo_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()))
      path_ = tmpl;
  }
  ~scratch_dir() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

} // namespace bamboo::test
