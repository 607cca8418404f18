// A file a user names for a run's record (metrics CSV, sample ledger): opened
// without following a symbolic link at its last component, and refused when it
// is a regular file with another hard link, so that a link planted in a shared
// directory cannot turn the run's writes onto another file (a directory
// further up may be a link: that is the user's choice). Each line goes to the
// file at once, so it survives a crash of the run.
#pragma once

#include <cstdint>
#include <string>

namespace bamboo::app {

class record_file {
public:
  record_file() = default;
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;
  ~record_file();

  // append: keep what the file holds and write after it; else empty it.
  bool open(const std::string& path, bool append, std::string& error);
  bool is_open() const { return fd_ >= 0; }
  // Bytes in the file when it was opened.
  std::uint64_t size_at_open() const { return size_; }
  // False when the write failed (errno says why).
  bool write(const std::string& text);

private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

} // namespace bamboo::app
