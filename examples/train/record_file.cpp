#include "examples/train/record_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bamboo::app {

record_file::~record_file() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool record_file::open(const std::string& path, bool append, std::string& error) {
  const int fd =
      ::open(path.c_str(),
             O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
  if (fd < 0) {
    error = errno == ELOOP ? "a symbolic link (refused)" : std::strerror(errno);
    return false;
  }
  // A device or a pipe (/dev/stdout, a FIFO) is the user's to name; a regular
  // file must have a single link.
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0 && ((S_ISREG(st.st_mode) && st.st_nlink == 1) ||
                                            S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
  if (!ok) {
    error = S_ISREG(st.st_mode) ? "a file with other hard links (refused)"
                                : "not a regular file, a device or a pipe (refused)";
    ::close(fd);
    return false;
  }
  if (!append && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return false;
  }
  fd_ = fd;
  size_ = append ? static_cast<std::uint64_t>(st.st_size) : 0;
  return true;
}

bool record_file::write(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

} // namespace bamboo::app
