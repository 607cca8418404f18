#include "model/checkpoint.hpp"

#include "model/model_definition.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "log/log.hpp"
#include "model/checkpoint_manifest.hpp"
#include "model/safetensors.hpp"

namespace bamboo {

namespace fs = std::filesystem;

namespace {

constexpr const char* state_file = "state.safetensors";
constexpr const char* manifest_file = "manifest.json";

// A regular file's bytes, never through a symbolic link (a checkpoint
// directory that another user can write must not make us read, or trust, a
// file elsewhere); nullopt and `why` else, or past `limit` bytes.
std::optional<std::vector<std::uint8_t>> read_bytes(const std::string& path,
                                                    std::string* why = nullptr,
                                                    std::size_t limit = SIZE_MAX) {
  auto fail = [&](std::string w) {
    if (why)
      *why = std::move(w);
    return std::nullopt;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return fail(errno == ELOOP ? "a symbolic link (refused)" : "missing or unreadable");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > limit) {
    ::close(fd);
    return fail("of " + std::to_string(st.st_size) + " bytes (limit " +
                std::to_string(limit) + ")");
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const auto n = ::read(fd, out.data() + got, out.size() - got);
    if (n <= 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != out.size())
    return fail("shorter than its size");
  return out;
}

constexpr std::size_t manifest_limit = 1u << 20;

// step-00000006 -> 6
std::optional<std::int64_t> step_of_dir(const std::string& name) {
  const std::string prefix = "step-";
  if (name.rfind(prefix, 0) != 0)
    return std::nullopt;
  return decimal_number(name.substr(prefix.size()));
}

// Checkpoint directories, newest first.
std::vector<std::pair<std::int64_t, std::string>> listed(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto step = step_of_dir(e.path().filename().string());
    if (step && e.is_directory())
      out.emplace_back(*step, e.path().string());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

// A file name inside a step directory: no path, nothing hidden.
bool plain_name(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos;
}

} // namespace

std::string checkpoint_config(const train_config& cfg) {
  if (cfg.custom_model) // its own name and layer count; the trainer keeps it stable
    return "custom " + cfg.custom_model->name() +
           " layers=" + std::to_string(cfg.model_layers()) +
           " seed=" + std::to_string(cfg.seed) +
           " global_batch=" + std::to_string(cfg.global_batch);
  const auto& m = cfg.model;
  return std::string(to_string(m.kind)) + " layers=" + std::to_string(m.layers) +
         " d_model=" + std::to_string(m.d_model) + " heads=" + std::to_string(m.heads) +
         " seq_len=" + std::to_string(m.seq_len) + " vocab=" + std::to_string(m.vocab) +
         " mlp_ratio=" + std::to_string(m.mlp_ratio) +
         " seed=" + std::to_string(cfg.seed) +
         " global_batch=" + std::to_string(cfg.global_batch) + " data=" + cfg.data;
}

std::string checkpoint_step_dir(const std::string& dir, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::optional<checkpoint_shard> write_checkpoint_shard(
    const std::string& step_dir, const std::string& file, std::int64_t step,
    const std::map<std::string, std::vector<float>>& tensors, std::string& error) {
  std::error_code ec;
  fs::create_directories(step_dir, ec);
  if (ec) {
    error = "cannot create " + step_dir + ": " + ec.message();
    return std::nullopt;
  }
  // Straight from the snapshot to the file: no encoded copy in memory.
  std::vector<tensor_layout> layout;
  std::size_t size = 0;
  for (const auto& [name, values] : tensors) {
    layout.push_back({name, {static_cast<std::int64_t>(values.size())}, values.size()});
    size += 4 * values.size();
  }
  const auto header = safetensors_header({{"step", std::to_string(step)}}, layout);
  std::vector<byte_span> parts{{header.data(), header.size()}};
  for (const auto& [name, values] : tensors) // little-endian floats, as the format
    parts.push_back({values.data(), 4 * values.size()});
  std::string digest;
  if (!write_file_atomically((fs::path(step_dir) / file).string(), parts, &digest, error))
    return std::nullopt;
  return checkpoint_shard{file, digest, header.size() + size, tensors.size()};
}

bool write_checkpoint_manifest(const std::string& dir, const checkpoint_manifest& m,
                               int keep, std::string& error) {
  const auto path = checkpoint_step_dir(dir, m.step);
  auto keyed = m;
  keyed.mac = manifest_mac(m); // "" when the process keys none
  const auto text = format_manifest(keyed);
  if (!write_file_atomically((fs::path(path) / manifest_file).string(),
                             std::vector<std::uint8_t>(text.begin(), text.end()), error))
    return false;
  if (keep > 0) {
    int complete = 0;
    std::error_code ec;
    for (const auto& [step, p] : listed(dir)) {
      if (!fs::exists(fs::path(p) / manifest_file))
        continue;
      if (++complete > keep)
        fs::remove_all(p, ec);
    }
  }
  return true;
}

bool write_checkpoint(const std::string& dir, const checkpoint& c, int keep,
                      std::string& error) {
  auto shard = write_checkpoint_shard(checkpoint_step_dir(dir, c.step), state_file,
                                      c.step, c.tensors, error);
  if (!shard)
    return false;
  checkpoint_manifest m;
  m.step = c.step;
  m.config = c.config;
  m.files.push_back(*shard);
  return write_checkpoint_manifest(dir, m, keep, error);
}

std::optional<checkpoint> load_checkpoint_dir(const std::string& path,
                                              std::string& error) {
  std::error_code ec;
  if (fs::is_symlink(path, ec)) {
    error = "a symbolic link (refused)";
    return std::nullopt;
  }
  std::string why;
  auto manifest_bytes =
      read_bytes((fs::path(path) / manifest_file).string(), &why, manifest_limit);
  if (!manifest_bytes) {
    error = why == "missing or unreadable" ? "no manifest (an incomplete write)"
                                           : std::string(manifest_file) + ": " + why;
    return std::nullopt;
  }
  auto parsed =
      parse_manifest(std::string(manifest_bytes->begin(), manifest_bytes->end()), error);
  if (!parsed) {
    error = "manifest: " + error;
    return std::nullopt;
  }
  const auto& m = parsed->m;
  if (auto bad = check_manifest_mac(m)) {
    error = "manifest: " + *bad;
    return std::nullopt;
  }
  checkpoint c;
  // The step, and the one its directory is named after: an edited step would
  // run one step's state as another's.
  const auto named = step_of_dir(fs::path(path).filename().string());
  if (!named || *named != m.step) {
    error = "manifest: step " + std::to_string(m.step) + " in the directory " +
            fs::path(path).filename().string();
    return std::nullopt;
  }
  c.step = m.step;
  c.config = m.config;
  if (m.files.empty()) {
    error = "manifest: no files";
    return std::nullopt;
  }
  for (const auto& f : m.files) {
    const auto& file = f.file;
    if (!plain_name(file)) {
      error = "manifest: a file name that is not plain: " + file;
      return std::nullopt;
    }
    // Its size is the manifest's before a byte is read: a crafted or sparse
    // file of 200 GB is refused, not allocated.
    auto bytes = read_bytes((fs::path(path) / file).string(), &why,
                            static_cast<std::size_t>(f.bytes));
    if (!bytes) {
      error = why == "missing or unreadable" ? "no " + file : file + ": " + why;
      return std::nullopt;
    }
    const auto digest = sha256_hex(*bytes);
    if (digest != f.sha256 || bytes->size() != f.bytes) {
      error = file + " does not match the manifest (SHA-256 " + digest + ", " +
              std::to_string(bytes->size()) + " bytes; the manifest says " + f.sha256 +
              ", " + std::to_string(f.bytes) + " bytes)";
      return std::nullopt;
    }
    auto st = decode_safetensors(*bytes, error);
    if (!st) {
      error = file + ": " + error;
      return std::nullopt;
    }
    if (parsed->version >= 2 && st->tensors.size() != f.tensors) {
      error = file + ": " + std::to_string(st->tensors.size()) +
              " tensors, and the manifest counts " + std::to_string(f.tensors);
      return std::nullopt;
    }
    for (auto& t : st->tensors)
      if (!c.tensors.emplace(t.name, std::move(t.data)).second) {
        error = file + ": tensor " + t.name + " is in two files";
        return std::nullopt;
      }
  }
  // The files hold what the manifest counted (a file dropped from its list is
  // not a smaller checkpoint).
  if (parsed->tensors != c.tensors.size()) {
    error = "manifest: " + std::to_string(c.tensors.size()) +
            " tensors in its files, and it counts " + std::to_string(parsed->tensors);
    return std::nullopt;
  }
  return c;
}

bool has_complete_checkpoint(const std::string& dir) {
  if (dir.empty())
    return false;
  for (const auto& [step, path] : listed(dir))
    if (fs::exists(fs::path(path) / manifest_file))
      return true;
  return false;
}

std::size_t checkpoint_dirs(const std::string& dir) {
  return listed(dir).size();
}

std::optional<checkpoint>
load_latest_checkpoint(const std::string& dir, std::vector<std::string>& skipped,
                       std::string& error,
                       const std::function<std::string(const checkpoint&)>& incomplete) {
  if (!fs::is_directory(dir)) {
    error = "no checkpoint directory " + dir;
    return std::nullopt;
  }
  const auto all = listed(dir);
  std::string newest_why;
  for (const auto& [step, path] : all) {
    std::string why;
    auto c = load_checkpoint_dir(path, why);
    if (c && incomplete)
      why = incomplete(*c);
    if (c && why.empty())
      return c;
    if (newest_why.empty())
      newest_why = fs::path(path).filename().string() + ": " + why;
    skipped.push_back(path + ": " + why + "; skipped");
  }
  error = "no complete checkpoint in " + dir;
  if (all.size() == 1)
    error += ": its only checkpoint is damaged or incomplete (" + newest_why +
             "). Every checkpoint is kept unless --keep says otherwise; with one "
             "checkpoint (one --checkpoint-every interval in the run, or --keep 1) a "
             "single damaged file leaves nothing to resume from";
  else if (all.size() > 1)
    error += ": all " + std::to_string(all.size()) +
             " are damaged or incomplete (the newest, " + newest_why + ")";
  return std::nullopt;
}

bool lower_writer_priority() {
#ifdef __linux__
  // On Linux a nice value is a thread's own: this thread's id, not the process's.
  return setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), checkpoint_writer_nice) ==
         0;
#else
  return false;
#endif
}

double thread_cpu_seconds() {
#ifdef RUSAGE_THREAD
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
#else
  return 0;
#endif
}

namespace {
std::atomic<std::int64_t> checkpoint_cpu_us{0};
std::atomic<std::int64_t> checkpoint_snapshot_us{0};
} // namespace

double checkpoint_cpu_seconds() {
  return double(checkpoint_cpu_us.load()) * 1e-6;
}

void add_checkpoint_cpu(double seconds) {
  checkpoint_cpu_us.fetch_add(static_cast<std::int64_t>(seconds * 1e6));
}

double checkpoint_snapshot_seconds() {
  return double(checkpoint_snapshot_us.load()) * 1e-6;
}

void add_checkpoint_snapshot(double seconds) {
  checkpoint_snapshot_us.fetch_add(static_cast<std::int64_t>(seconds * 1e6));
}

checkpoint_writer::checkpoint_writer(std::string dir, int keep)
    : dir_(std::move(dir)), keep_(keep), thread_([this] { run(); }) {}

checkpoint_writer::~checkpoint_writer() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void checkpoint_writer::submit(checkpoint_manifest m) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    queue_.push_back(std::move(m));
  }
  cv_.notify_all();
}

void checkpoint_writer::failed(std::int64_t step, const std::string& why) {
  log::get("bamboo.checkpoint")
      ->error("checkpoint of step {} not written: {}", step, why);
  std::lock_guard<std::mutex> guard{mtx_};
  failures_.push_back("step " + std::to_string(step) + ": " + why);
}

std::vector<std::string> checkpoint_writer::finish() {
  std::unique_lock<std::mutex> lock{mtx_};
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  return failures_;
}

void checkpoint_writer::run() {
  auto logger = log::get("bamboo.checkpoint");
  if (!lower_writer_priority())
    logger->debug("manifest writer runs at normal priority");
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty())
      return; // stopping, nothing left
    auto m = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string error;
    const double cpu0 = thread_cpu_seconds();
    const bool ok = write_checkpoint_manifest(dir_, m, keep_, error);
    add_checkpoint_cpu(thread_cpu_seconds() - cpu0);
    if (ok) {
      logger->info("checkpoint of step {} written ({} files) in {}", m.step,
                   m.files.size(), dir_);
      if (on_written_)
        on_written_(m.step, checkpoint_step_dir(dir_, m.step));
    } else
      logger->error("checkpoint of step {} not written: {}", m.step, error);
    lock.lock();
    busy_ = false;
    if (!ok)
      failures_.push_back("step " + std::to_string(m.step) + ": " + error);
    cv_.notify_all();
  }
}

} // namespace bamboo
