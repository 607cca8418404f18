#include "model/checkpoint.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "log/log.hpp"
#include "model/safetensors.hpp"

namespace bamboo {

namespace fs = std::filesystem;

namespace {

constexpr const char* format_name = "bamboo-checkpoint-1";
constexpr const char* state_file = "state.safetensors";
constexpr const char* manifest_file = "manifest.json";

std::string sha256_hex(const std::vector<std::uint8_t>& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  std::string out;
  char buf[3];
  for (unsigned i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", md[i]);
    out += buf;
  }
  return out;
}

std::string step_dir(const std::string& dir, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::optional<std::vector<std::uint8_t>> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
}

// Checkpoint directories, newest first.
std::vector<std::pair<std::int64_t, std::string>> listed(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    long long step = -1;
    if (e.is_directory() && std::sscanf(name.c_str(), "step-%lld", &step) == 1 &&
        step >= 0)
      out.emplace_back(step, e.path().string());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

// One checkpoint directory, checked against its manifest.
std::optional<checkpoint> load_one(const std::string& path, std::string& error) {
  auto manifest_bytes = read_bytes((fs::path(path) / manifest_file).string());
  if (!manifest_bytes) {
    error = "no manifest (an incomplete write)";
    return std::nullopt;
  }
  auto m = parse_string_object(
      std::string(manifest_bytes->begin(), manifest_bytes->end()), error);
  if (!m) {
    error = "manifest: " + error;
    return std::nullopt;
  }
  auto field = [&](const char* key) {
    return m->count(key) ? m->at(key) : std::string();
  };
  if (field("format") != format_name) {
    error = "manifest: not a " + std::string(format_name) + " manifest";
    return std::nullopt;
  }
  auto bytes = read_bytes((fs::path(path) / state_file).string());
  if (!bytes) {
    error = std::string("no ") + state_file;
    return std::nullopt;
  }
  const auto digest = sha256_hex(*bytes);
  if (digest != field("state_sha256") ||
      std::to_string(bytes->size()) != field("state_bytes")) {
    error = std::string(state_file) + " does not match the manifest (SHA-256 " + digest +
            ", " + std::to_string(bytes->size()) + " bytes; the manifest says " +
            field("state_sha256") + ", " + field("state_bytes") + " bytes)";
    return std::nullopt;
  }
  auto st = decode_safetensors(*bytes, error);
  if (!st) {
    error = std::string(state_file) + ": " + error;
    return std::nullopt;
  }
  checkpoint c;
  try {
    c.step = std::stoll(field("step"));
  } catch (const std::exception&) {
    error = "manifest: no step";
    return std::nullopt;
  }
  c.config = field("config");
  for (auto& t : st->tensors)
    c.tensors[t.name] = std::move(t.data);
  return c;
}

} // namespace

std::string checkpoint_config(const train_config& cfg) {
  const auto& m = cfg.model;
  return std::string(to_string(m.kind)) + " layers=" + std::to_string(m.layers) +
         " d_model=" + std::to_string(m.d_model) + " heads=" + std::to_string(m.heads) +
         " seq_len=" + std::to_string(m.seq_len) + " vocab=" + std::to_string(m.vocab) +
         " mlp_ratio=" + std::to_string(m.mlp_ratio) +
         " seed=" + std::to_string(cfg.seed) +
         " global_batch=" + std::to_string(cfg.global_batch) + " data=" + cfg.data;
}

bool write_checkpoint(const std::string& dir, const checkpoint& c, int keep,
                      std::string& error) {
  const auto path = step_dir(dir, c.step);
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    error = "cannot create " + path + ": " + ec.message();
    return false;
  }
  safetensors_file st;
  st.metadata["step"] = std::to_string(c.step);
  for (const auto& [name, values] : c.tensors)
    st.tensors.push_back({name, {static_cast<std::int64_t>(values.size())}, values});
  const auto bytes = encode_safetensors(st);
  if (!write_file_atomically((fs::path(path) / state_file).string(), bytes, error))
    return false;
  std::map<std::string, std::string> manifest{
      {"format", format_name},
      {"step", std::to_string(c.step)},
      {"config", c.config},
      {"state_file", state_file},
      {"state_sha256", sha256_hex(bytes)},
      {"state_bytes", std::to_string(bytes.size())},
      {"tensors", std::to_string(c.tensors.size())}};
  const auto text = format_string_object(manifest);
  if (!write_file_atomically((fs::path(path) / manifest_file).string(),
                             std::vector<std::uint8_t>(text.begin(), text.end()), error))
    return false;
  if (keep > 0) {
    int complete = 0;
    for (const auto& [step, p] : listed(dir)) {
      if (!fs::exists(fs::path(p) / manifest_file))
        continue;
      if (++complete > keep)
        fs::remove_all(p, ec);
    }
  }
  return true;
}

std::optional<checkpoint> load_latest_checkpoint(const std::string& dir,
                                                 std::vector<std::string>& skipped,
                                                 std::string& error) {
  if (!fs::is_directory(dir)) {
    error = "no checkpoint directory " + dir;
    return std::nullopt;
  }
  for (const auto& [step, path] : listed(dir)) {
    std::string why;
    auto c = load_one(path, why);
    if (c)
      return c;
    skipped.push_back(path + ": " + why + "; skipped");
  }
  error = "no complete checkpoint in " + dir;
  return std::nullopt;
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

void checkpoint_writer::submit(checkpoint c) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    queue_.push_back(std::move(c));
  }
  cv_.notify_all();
}

std::vector<std::string> checkpoint_writer::finish() {
  std::unique_lock<std::mutex> lock{mtx_};
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  return failures_;
}

void checkpoint_writer::run() {
  auto logger = log::get("bamboo.checkpoint");
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty())
      return; // stopping, nothing left
    auto c = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string error;
    const bool ok = write_checkpoint(dir_, c, keep_, error);
    if (ok)
      logger->info("checkpoint of step {} written ({} tensors) in {}", c.step,
                   c.tensors.size(), dir_);
    else
      logger->error("checkpoint of step {} not written: {}", c.step, error);
    lock.lock();
    busy_ = false;
    if (!ok)
      failures_.push_back("step " + std::to_string(c.step) + ": " + error);
    cv_.notify_all();
  }
}

} // namespace bamboo
