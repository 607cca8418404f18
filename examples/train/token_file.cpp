#include "examples/train/token_file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <random>

namespace bamboo::app {

token_file::token_file() {
  dir_ = (std::filesystem::temp_directory_path() / "bamboo-token-XXXXXX").string();
  if (!mkdtemp(dir_.data())) { // mode 0700
    dir_.clear();
    return;
  }
  path_ = dir_ + "/token";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    path_.clear();
    return;
  }
  std::random_device rd;
  for (int i = 0; i < 32; ++i)
    token_ += "0123456789abcdef"[rd() % 16];
  const auto line = token_ + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    path_.clear();
  ::close(fd);
}

token_file::~token_file() {
  if (!dir_.empty())
    std::filesystem::remove_all(dir_);
}

} // namespace bamboo::app
