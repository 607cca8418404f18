// Manifests keyed with the user's cluster token: what a process that has the
// key refuses (an edited step, a substituted shard with its SHA-256 recomputed,
// a manifest without the digest, another token's), and what it takes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/checkpoint.hpp"
#include "model/checkpoint_manifest.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;
namespace fs = std::filesystem;

namespace {

const std::string user_token = "a user's cluster token 0123456789";

// The key for one test, removed when it ends (tests share the process).
struct keyed {
  explicit keyed(const std::string& token) { key_checkpoints(token); }
  ~keyed() { key_checkpoints(""); }
};

checkpoint some_checkpoint(std::int64_t step, float value) {
  checkpoint c;
  c.step = step;
  c.config = "gpt d=32";
  c.tensors["w"] = {value, value + 1, value + 2};
  c.tensors["b"] = {value * 2};
  return c;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

checkpoint_manifest manifest_of(const std::string& step_dir) {
  std::string error;
  auto p = parse_manifest(read_text(step_dir + "/manifest.json"), error);
  INFO(error);
  REQUIRE(p);
  return p->m;
}

std::string load_error(const std::string& step_dir) {
  std::string error;
  auto c = load_checkpoint_dir(step_dir, error);
  CHECK_FALSE(c);
  return error;
}

} // namespace

TEST_CASE("a run with the user's token writes a keyed manifest that loads back - and "
          "an edited step is refused by its digest",
          "[model]") {
  keyed key{user_token};
  scratch_dir dir;
  std::string error;
  REQUIRE(write_checkpoint(dir.path(), some_checkpoint(4, 1.5f), 0, error));
  const auto step4 = checkpoint_step_dir(dir.path(), 4);
  auto m = manifest_of(step4);
  CHECK(m.mac.size() == 64);
  auto back = load_checkpoint_dir(step4, error);
  INFO(error);
  REQUIRE(back);
  CHECK(back->step == 4);
  CHECK(back->tensors == some_checkpoint(4, 1.5f).tensors);
  // Step 4's state presented as step 6: the directory renamed, the step edited.
  const auto step6 = checkpoint_step_dir(dir.path(), 6);
  fs::rename(step4, step6);
  m.step = 6;
  write_text(step6 + "/manifest.json", format_manifest(m)); // the old digest
  CHECK(load_error(step6).find("keyed digest ('mac') does not match") !=
        std::string::npos);
}

TEST_CASE("a shard substituted with its SHA-256 recomputed in the manifest - an unkeyed "
          "manifest - and another token's are refused where the key is held",
          "[model]") {
  scratch_dir dir, other;
  std::string error;
  {
    keyed key{user_token};
    REQUIRE(write_checkpoint(dir.path(), some_checkpoint(4, 1.5f), 0, error));
  }
  REQUIRE(write_checkpoint(other.path(), some_checkpoint(4, -7.0f), 0, error)); // unkeyed
  const auto mine = checkpoint_step_dir(dir.path(), 4);
  const auto theirs = checkpoint_step_dir(other.path(), 4);
  keyed key{user_token};
  // The unkeyed checkpoint: no digest.
  CHECK(load_error(theirs).find("no keyed digest") != std::string::npos);
  // Their shard in place of ours, the manifest's SHA-256 and size made to fit.
  auto m = manifest_of(mine);
  const auto t = manifest_of(theirs);
  fs::copy_file(theirs + "/" + t.files[0].file, mine + "/" + m.files[0].file,
                fs::copy_options::overwrite_existing);
  m.files[0].sha256 = t.files[0].sha256;
  m.files[0].bytes = t.files[0].bytes;
  write_text(mine + "/manifest.json", format_manifest(m));
  CHECK(load_error(mine).find("keyed digest ('mac') does not match") !=
        std::string::npos);
  // Another token's key refuses an intact manifest of ours.
  scratch_dir third;
  REQUIRE(write_checkpoint(third.path(), some_checkpoint(4, 1.5f), 0, error));
  keyed another{"another cluster token 0123456789"};
  CHECK(load_error(checkpoint_step_dir(third.path(), 4)).find("does not match") !=
        std::string::npos);
}

TEST_CASE("a process without the key reads a keyed manifest as any other", "[model]") {
  scratch_dir dir;
  std::string error;
  {
    keyed key{user_token};
    REQUIRE(write_checkpoint(dir.path(), some_checkpoint(2, 0.25f), 0, error));
  }
  REQUIRE_FALSE(checkpoints_keyed());
  auto back = load_checkpoint_dir(checkpoint_step_dir(dir.path(), 2), error);
  INFO(error);
  REQUIRE(back);
  CHECK(back->tensors == some_checkpoint(2, 0.25f).tensors);
}
