// Checkpoints in embedded mode: a resumed run (on any number of stages)
// continues with the losses, parameters and moments of a straight run, to
// the last bit; damaged checkpoints are skipped; bad input is named.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "actors/shard_writer.hpp"
#include "model/checkpoint.hpp"
#include "model/checkpoint_manifest.hpp"
#include "model/safetensors.hpp"
#include "tests/run_command.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;
using bamboo::test::scratch_dir;

namespace {

train_config small(model_kind kind, int stages) {
  train_config c;
  c.model.kind = kind;
  c.model.layers = 4;
  c.model.d_model = 32;
  c.model.heads = 2;
  c.model.seq_len = 16;
  c.model.vocab = 64;
  c.model.dropout = 0.1; // every draw keyed by (seed, step, micro-batch, layer)
  c.stages = stages;
  c.micro_batch = 2;
  c.global_batch = 8;
  c.steps = 10;
  c.seed = 9;
  c.threads = 1;
  return c;
}

run_result train(const train_config& c, run_options o) {
  o.collect_parameters = true;
  auto r = run_embedded(c, o);
  if (!r)
    FAIL("run failed: " << describe(r.error()));
  return std::move(*r);
}

run_options checkpointing(const std::string& dir, int every) {
  run_options o;
  o.checkpoints.dir = dir;
  o.checkpoints.every = every;
  return o;
}

// What a run stopped before its end leaves: every checkpoint but the one of
// its last step (written at the end of every run with a checkpoint directory).
void without_last(const std::string& dir, const train_config& cfg) {
  const auto last = checkpoint_step_dir(dir, cfg.steps);
  REQUIRE(std::filesystem::exists(last + "/manifest.json"));
  std::filesystem::remove_all(last);
}

// A 6-step run's checkpoints of steps 2 and 4 in `dir` (as if stopped before
// its last step's): the newest, 4, to tamper with, and 2 to fall back on.
void checkpoints_2_and_4(const std::string& dir) {
  auto cfg = small(model_kind::gpt, 2);
  cfg.steps = 6;
  train(cfg, checkpointing(dir, 2));
  without_last(dir, cfg);
}

// The text of a file.
std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

run_options resuming(const std::string& dir) {
  run_options o;
  o.checkpoints.dir = dir;
  o.checkpoints.resume = true;
  return o;
}

// The resumed run's steps equal the straight run's from `first` on, and so do
// the final parameters and both moments (step counters are per stage: left out).
void check_continues(const run_result& straight, const run_result& resumed,
                     std::int64_t first) {
  REQUIRE(resumed.steps.size() == straight.steps.size() - first);
  for (std::size_t i = 0; i < resumed.steps.size(); ++i) {
    CHECK(resumed.steps[i].step == first + static_cast<std::int64_t>(i));
    CHECK(resumed.steps[i].loss == straight.steps[first + i].loss);
  }
  std::map<std::string, std::vector<float>> a, b;
  for (const auto& p : straight.parameters)
    if (p.name.find("#steps") == std::string::npos)
      a[p.name] = p.values;
  for (const auto& p : resumed.parameters)
    if (p.name.find("#steps") == std::string::npos)
      b[p.name] = p.values;
  REQUIRE_FALSE(a.empty());
  CHECK(a.size() == b.size());
  for (const auto& [name, values] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    CHECK(std::memcmp(values.data(), b[name].data(), 4 * values.size()) == 0);
  }
}

} // namespace

TEST_CASE("a run resumed from its step-6 checkpoint equals the straight 10-step run "
          "to the last bit, GPT and BERT with dropout",
          "[actors]") {
  for (auto kind : {model_kind::gpt, model_kind::bert}) {
    DYNAMIC_SECTION(to_string(kind)) {
      const scratch_dir dir;
      const auto cfg = small(kind, 4);
      const auto straight = train(cfg, {});
      // Same options as the straight run, plus a checkpoint at step 6.
      train(cfg, checkpointing(dir.path(), 6));
      without_last(dir.path(), cfg);
      CHECK(std::filesystem::exists(dir.path() + "/step-00000006/manifest.json"));
      CHECK_FALSE(std::filesystem::exists(dir.path() + "/step-00000003"));
      check_continues(straight, train(cfg, resuming(dir.path())), 6);
    }
  }
}

TEST_CASE("a checkpoint written with 4 stages resumes on 2 and on 1 with the 4-stage "
          "run's losses",
          "[actors]") {
  const scratch_dir dir;
  const auto cfg = small(model_kind::gpt, 4);
  const auto straight = train(cfg, checkpointing(dir.path(), 5));
  without_last(dir.path(), cfg);
  for (int stages : {2, 1}) {
    DYNAMIC_SECTION(stages << " stages") {
      auto resumed = train(small(model_kind::gpt, stages), resuming(dir.path()));
      REQUIRE(resumed.steps.size() == 5);
      for (std::size_t i = 0; i < 5; ++i)
        CHECK(resumed.steps[i].loss == straight.steps[5 + i].loss);
    }
  }
}

TEST_CASE("a damaged latest checkpoint is skipped for the previous complete one, and "
          "--keep removes the oldest",
          "[actors]") {
  const scratch_dir dir;
  const auto cfg = small(model_kind::gpt, 2);
  auto o = checkpointing(dir.path(), 2);
  o.checkpoints.keep = 2;
  const auto straight = train(cfg, o);
  // Steps 2, 4, 6, 8 and the last, 10, were written; the newest two are kept.
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/step-00000006"));
  CHECK(std::filesystem::exists(dir.path() + "/step-00000008/manifest.json"));
  const auto latest = dir.path() + "/step-00000010/stage-1.safetensors";
  {
    std::fstream f(latest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10; // one bit of one value
    f.seekp(-5, std::ios::end);
    f.write(&c, 1);
  }
  std::vector<std::string> skipped;
  std::string error;
  auto c = load_latest_checkpoint(dir.path(), skipped, error);
  REQUIRE(c);
  CHECK(c->step == 8);
  REQUIRE(skipped.size() == 1);
  CHECK(
      skipped[0].find("step-00000010: stage-1.safetensors does not match the manifest") !=
      std::string::npos);
  { // resumed from a copy: the run writes its last step's checkpoint anew
    const scratch_dir copy;
    std::filesystem::copy(dir.path(), copy.path(),
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
    check_continues(straight, train(cfg, resuming(copy.path())), 8);
  }

  // An interrupted write (no manifest) is not a checkpoint either.
  std::filesystem::remove(dir.path() + "/step-00000008/manifest.json");
  skipped.clear();
  CHECK_FALSE(load_latest_checkpoint(dir.path(), skipped, error));
  CHECK(skipped.size() == 2);
  CHECK(error.find("no complete checkpoint") != std::string::npos);
  CHECK(error.find("all 2 are damaged or incomplete (the newest, step-00000010: "
                   "stage-1.safetensors does not match the manifest") !=
        std::string::npos);
}

TEST_CASE("when the only checkpoint is damaged, --resume says so - why - and how many "
          "checkpoints are kept",
          "[actors]") {
  const scratch_dir dir;
  auto cfg = small(model_kind::gpt, 2);
  cfg.steps = 6;
  train(cfg, checkpointing(dir.path(), 4)); // step 4 and the last
  without_last(dir.path(), cfg);
  const auto file = dir.path() + "/step-00000004/stage-0.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(-5, std::ios::end);
    f.write(&c, 1);
  }
  auto r = run_embedded(cfg, resuming(dir.path()));
  REQUIRE_FALSE(r);
  const auto why = describe(r.error());
  INFO(why);
  CHECK(why.find("its only checkpoint is damaged or incomplete (step-00000004: "
                 "stage-0.safetensors does not match the manifest") != std::string::npos);
  CHECK(why.find("Every checkpoint is kept unless --keep says otherwise") !=
        std::string::npos);
}

TEST_CASE("resuming another configuration is refused by name, and resuming from a "
          "missing or empty directory starts at step 0",
          "[actors]") {
  const scratch_dir dir;
  auto cfg = small(model_kind::gpt, 2);
  cfg.steps = 4;
  const auto straight = train(cfg, {});
  // One launch script may always pass --resume: nothing there yet is step 0.
  check_continues(straight, train(cfg, resuming(dir.path() + "/missing")), 0);
  check_continues(straight, train(cfg, resuming(dir.path())), 0);
  train(cfg, checkpointing(dir.path(), 2));
  auto wider = cfg;
  wider.model.d_model = 64;
  auto other = run_embedded(wider, resuming(dir.path()));
  REQUIRE_FALSE(other);
  CHECK(describe(other.error()).find("of another configuration") != std::string::npos);
  auto done = cfg;
  done.steps = 2;
  auto past = run_embedded(done, resuming(dir.path()));
  REQUIRE_FALSE(past);
  CHECK(describe(past.error()).find("leaves nothing to run") != std::string::npos);
  run_options no_dir;
  no_dir.checkpoints.every = 2;
  auto missing = run_embedded(cfg, no_dir);
  REQUIRE_FALSE(missing);
  CHECK(describe(missing.error()).find("need --checkpoint-dir") != std::string::npos);
}

TEST_CASE("a Python reader finds each layer's parameters and moments in a checkpoint "
          "by global layer path",
          "[actors]") {
  const scratch_dir dir;
  auto cfg = small(model_kind::gpt, 2);
  cfg.steps = 3;
  const auto r = train(cfg, checkpointing(dir.path(), 2));
  auto out = test::run_command(std::string("/usr/bin/python3 ") + BAMBOO_SOURCE_DIR +
                               "/tests/model/read_safetensors.py " + dir.path() +
                               "/step-00000002");
  INFO(out.output);
  REQUIRE(out.status == 0);
  CHECK(out.output.find("meta step=2") != std::string::npos);
  CHECK(out.output.find("manifest step=2") != std::string::npos);
  CHECK(out.output.find("manifest files=stage-0.safetensors,stage-1.safetensors") !=
        std::string::npos);
  CHECK(out.output.find("manifest cursor=16") != std::string::npos);
  const auto lines = "\n" + out.output;
  // Every parameter of the final state is there with both moments (the values
  // are those of step 2, not the final ones: only names and counts compare).
  for (const auto& p : r.parameters) {
    if (p.name.find("#steps") != std::string::npos)
      continue;
    INFO(p.name);
    CHECK(lines.find("\n" + p.name + " " + std::to_string(p.values.size()) + " " +
                     std::to_string(p.values.size()) + " ") != std::string::npos);
  }
}

TEST_CASE("a checkpoint that does not fit on the disk is reported in one line, training "
          "goes on, and the previous checkpoint stays whole (a 1 MiB tmpfs)",
          "[actors]") {
  const scratch_dir dir;
  const auto disk = dir.path() + "/disk";
  std::filesystem::create_directories(disk);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=1m") != 0) {
    WARN("cannot mount a tmpfs here (" << std::strerror(errno) << "): not checked");
    return;
  }
  struct unmount {
    std::string path;
    ~unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } guard{disk};
  auto cfg = small(model_kind::gpt, 2);
  cfg.steps = 6;
  auto o = checkpointing(disk, 2);
  o.checkpoints.keep = 1;
  // About 680 KiB a checkpoint: step 2's fits, step 4's beside it does not,
  // nor the last step's (6).
  const auto r = train(cfg, o);
  REQUIRE(r.steps.size() == 6);
  REQUIRE(r.checkpoint_failures.size() == 2);
  INFO(r.checkpoint_failures[0] << "\n" << r.checkpoint_failures[1]);
  CHECK(r.checkpoint_failures[0].find("step 4: ") == 0);
  CHECK(r.checkpoint_failures[1].find("step 6: ") == 0);
  for (const auto& f : r.checkpoint_failures)
    CHECK(f.find("No space left on device") != std::string::npos);
  for (const auto& e : std::filesystem::recursive_directory_iterator(disk))
    CHECK(e.path().extension() != ".tmp"); // a failed write leaves nothing half-done
  std::vector<std::string> skipped;
  std::string error;
  auto c = load_latest_checkpoint(disk, skipped, error);
  REQUIRE(c);
  CHECK(c->step == 2);
  REQUIRE(skipped.size() == 2); // step 6's and step 4's files without a manifest
  for (const auto& why : skipped)
    CHECK(why.find("no manifest") != std::string::npos);
}

TEST_CASE(
    "in embedded mode two neighbours lost in one step roll the survivors back to "
    "the last checkpoint, and the run ends with the straight run's losses and state",
    "[actors]") {
  const scratch_dir dir;
  auto cfg = small(model_kind::gpt, 4);
  cfg.steps = 12;
  const auto straight = train(cfg, {});
  auto o = checkpointing(dir.path(), 5);
  preempt_spec a, b;
  a.node = 1;
  a.step = 8;
  b.node = 2;
  b.step = 8;
  b.op = 1;
  o.preemptions = {a, b};
  // Steps take milliseconds here, and the shards are written at a low priority:
  // on a busy machine nodes 1 and 2 would die before theirs of step 5 are in,
  // leaving no complete checkpoint (as it should). Before step 8 the test
  // lets the writers finish and hand their shards over.
  o.on_step = [&](const step_record& s) {
    if (s.step != 7)
      return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto written = [&] {
      for (int k = 0; k < cfg.stages; ++k)
        if (!std::filesystem::exists(checkpoint_step_dir(dir.path(), 5) + "/" +
                                     shard_file(k)))
          return false;
      return true;
    };
    while (!written() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // the replies
  };
  std::vector<std::int64_t> rollbacks;
  o.on_rollback = [&](std::int64_t to, const std::string& why) {
    rollbacks.push_back(to);
    CHECK(why.find("shadows cannot cover it") != std::string::npos);
  };
  const auto r = train(cfg, o);
  CHECK(rollbacks == std::vector<std::int64_t>{5});
  CHECK(r.rollbacks == 1);
  check_continues(straight, r, 0);
  // The redone steps ran on the survivors, nodes 0 and 3, under a new generation.
  CHECK(r.steps.at(5).owners == std::vector<int>{0, 3});
  CHECK(r.steps.at(5).event == "rolled back to step 5");
  CHECK(r.steps.at(5).generation > r.steps.at(4).generation);
  // Without a checkpoint to go back to, the same losses end the run (exit 3).
  o.checkpoints = {};
  auto fatal = run_embedded(cfg, o);
  REQUIRE_FALSE(fatal);
  CHECK(describe(fatal.error()).find("unrecoverable_failure") != std::string::npos);
}

TEST_CASE("a burst of two neighbours before the first checkpoint rolls back to step "
          "0 - the seed's state - and the run ends with the straight run's losses and "
          "state",
          "[actors]") {
  const scratch_dir dir;
  auto cfg = small(model_kind::gpt, 4);
  cfg.steps = 8;
  const auto straight = train(cfg, {});
  auto o = checkpointing(dir.path(), 5); // the first checkpoint would be step 5's
  preempt_spec a, b;
  a.node = 1;
  a.step = 3;
  b.node = 2;
  b.step = 3;
  b.op = 1;
  o.preemptions = {a, b};
  std::vector<std::int64_t> rollbacks;
  o.on_rollback = [&](std::int64_t to, const std::string&) { rollbacks.push_back(to); };
  const auto r = train(cfg, o);
  CHECK(rollbacks == std::vector<std::int64_t>{0});
  CHECK(r.rollbacks == 1);
  CHECK(r.rollback_losses == 2);
  check_continues(straight, r, 0);
  CHECK(r.steps.at(0).event == "rolled back to step 0");
  CHECK(r.steps.at(0).owners == std::vector<int>{0, 3});
}

TEST_CASE("a checkpoint whose manifest or tensor file is a symbolic link is refused by "
          "name - and the one before it is used",
          "[actors]") {
  const scratch_dir dir, elsewhere;
  checkpoints_2_and_4(dir.path());
  namespace fs = std::filesystem;
  const auto newest = dir.path() + "/step-00000004";
  // The same bytes, but through a link: a writer of the directory could point
  // it anywhere.
  const auto file = newest + "/stage-1.safetensors";
  fs::copy_file(file, elsewhere.path() + "/copy");
  fs::remove(file);
  fs::create_symlink(elsewhere.path() + "/copy", file);
  std::vector<std::string> skipped;
  std::string error;
  auto c = load_latest_checkpoint(dir.path(), skipped, error);
  REQUIRE(c);
  CHECK(c->step == 2);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].find("stage-1.safetensors: a symbolic link (refused)") !=
        std::string::npos);
  // A step directory that is itself a link is refused too.
  fs::rename(newest, elsewhere.path() + "/step-00000004");
  fs::create_directory_symlink(elsewhere.path() + "/step-00000004", newest);
  skipped.clear();
  REQUIRE(load_latest_checkpoint(dir.path(), skipped, error));
  REQUIRE_FALSE(skipped.empty());
  CHECK(skipped[0].find("a symbolic link (refused)") != std::string::npos);
}

TEST_CASE("a manifest whose step was edited - to another step, with junk after it, as a "
          "string or twice - is refused by name, and the checkpoint before it is used",
          "[actors]") {
  const scratch_dir dir;
  checkpoints_2_and_4(dir.path());
  const auto manifest = dir.path() + "/step-00000004/manifest.json";
  const auto original = text_of(manifest);
  const std::string field = "\"step\": 4,";
  REQUIRE(original.find(field) != std::string::npos);
  for (const char* edit : {"5", "4junk", "-4", "4.0", "", "99999999999999999999", "\"4\"",
                           "4, \"step\": 4"}) {
    INFO("step edited to '" << edit << "'");
    auto m = original;
    m.replace(m.find(field), field.size(), "\"step\": " + std::string(edit) + ",");
    std::ofstream(manifest, std::ios::binary | std::ios::trunc) << m;
    std::vector<std::string> skipped;
    std::string error;
    auto c = load_latest_checkpoint(dir.path(), skipped, error);
    REQUIRE(c);
    CHECK(c->step == 2);
    REQUIRE(skipped.size() == 1);
    INFO(skipped[0]);
    CHECK(skipped[0].find("step-00000004: manifest: ") != std::string::npos);
  }
}

TEST_CASE("a sparse 200 GB shard is refused by its size before a byte is read - never "
          "an abort - and the checkpoint before it is used",
          "[actors]") {
  const scratch_dir dir;
  checkpoints_2_and_4(dir.path());
  const auto shard = dir.path() + "/step-00000004/stage-1.safetensors";
  std::filesystem::resize_file(shard, 200ull << 30); // sparse: no disk used
  std::vector<std::string> skipped;
  std::string error;
  auto c = load_latest_checkpoint(dir.path(), skipped, error);
  REQUIRE(c);
  CHECK(c->step == 2);
  REQUIRE(skipped.size() == 1);
  INFO(skipped[0]);
  CHECK(skipped[0].find("stage-1.safetensors: of 214748364800 bytes") !=
        std::string::npos);
}

TEST_CASE("300 crafted manifests are each refused with a reason - never an abort - and "
          "the intact checkpoint before them is used",
          "[actors]") {
  const scratch_dir dir;
  checkpoints_2_and_4(dir.path());
  const auto manifest = dir.path() + "/step-00000004/manifest.json";
  const auto original = text_of(manifest);
  REQUIRE_FALSE(original.empty());
  std::vector<std::string> none;
  std::string no_error;
  const auto intact = load_latest_checkpoint(dir.path(), none, no_error);
  REQUIRE(intact);
  REQUIRE(intact->step == 4);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::vector<std::string> nasty{"99999999999999999999999",
                                       "-1",
                                       "1e308",
                                       "\"",
                                       "\\u0000",
                                       "../../etc/passwd",
                                       "{\"a\":",
                                       "]]]]",
                                       std::string(4096, '9')};
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string m = original;
    switch (next() % 5) {
    case 0: // flip bytes
      for (int j = 0; j < 1 + static_cast<int>(next() % 4); ++j)
        m[next() % m.size()] ^= static_cast<char>(1 + next() % 255);
      break;
    case 1: // truncate
      m.resize(next() % m.size());
      break;
    case 2: { // splice a nasty token in
      const auto& t = nasty[next() % nasty.size()];
      m.insert(next() % m.size(), t);
      break;
    }
    case 3: { // replace a value after a colon
      auto colon = m.find(':', next() % m.size());
      if (colon == std::string::npos)
        colon = m.find(':');
      auto end = m.find_first_of(",}", colon);
      m.replace(colon + 1, end == std::string::npos ? 0 : end - colon - 1,
                nasty[next() % nasty.size()]);
      break;
    }
    default: // duplicate a stretch
      m.insert(next() % m.size(), m.substr(next() % m.size(), next() % 64));
    }
    if (m == original)
      continue;
    {
      std::ofstream out(manifest, std::ios::binary | std::ios::trunc);
      out << m;
    }
    std::vector<std::string> skipped;
    std::string error;
    auto c = load_latest_checkpoint(dir.path(), skipped, error);
    REQUIRE(c); // the step-2 checkpoint, or the step-4 one if the edit was harmless
    if (c->step == 2) {
      ++refused;
      REQUIRE(skipped.size() == 1);
      CHECK(skipped[0].find("step-00000004: ") != std::string::npos);
      CHECK(skipped[0].size() > std::string("step-00000004: ; skipped").size());
    } else { // white space, a field nobody reads, or the configuration (which a
             // resume checks against its run's): step 4's tensors as they were
      INFO(m);
      CHECK(c->step == 4);
      CHECK(c->tensors == intact->tensors);
    }
  }
  INFO(refused << " of 300 refused");
  CHECK(refused > 200);
}

TEST_CASE("a version 1 manifest (strings for numbers) is still read, a manifest of "
          "another format version is refused by its number, and a file's tensor count is "
          "checked",
          "[actors]") {
  const scratch_dir dir;
  checkpoints_2_and_4(dir.path());
  const auto manifest = dir.path() + "/step-00000004/manifest.json";
  const auto original = text_of(manifest);
  std::vector<std::string> none;
  std::string no_error;
  const auto intact = load_latest_checkpoint(dir.path(), none, no_error);
  REQUIRE(intact);
  REQUIRE(intact->step == 4);
  auto with = [&](const std::string& text) {
    std::ofstream(manifest, std::ios::binary | std::ios::trunc) << text;
    std::vector<std::string> skipped;
    std::string error;
    auto c = load_latest_checkpoint(dir.path(), skipped, error);
    REQUIRE(c);
    return std::make_pair(c, skipped);
  };
  // The same checkpoint as the previous build wrote its manifest.
  std::string error;
  const auto v2 = parse_manifest(original, error);
  INFO(error);
  REQUIRE(v2);
  CHECK(v2->version == 2);
  const auto& m = v2->m;
  auto str = [](auto n) { return json_quoted(std::to_string(n)); };
  std::string files,
      old = "{\"format\": \"bamboo-checkpoint-1\", \"step\": " + str(m.step) +
            ", \"config\": " + json_quoted(m.config) + ", \"seed\": " + str(m.seed) +
            ", \"cursor\": " + str(m.cursor) + ", \"generation\": " + str(m.generation) +
            ", \"plan\": " + json_quoted(m.plan) + ", \"tensors\": " + str(v2->tensors);
  for (const auto& f : m.files) {
    files += (files.empty() ? "" : ",") + f.file;
    old += ", " + json_quoted(f.file + ".sha256") + ": " + json_quoted(f.sha256) + ", " +
           json_quoted(f.file + ".bytes") + ": " + str(f.bytes);
  }
  old += ", \"files\": " + json_quoted(files) + "}";
  INFO(old);
  auto [c1, s1] = with(old);
  CHECK(c1->step == 4);
  CHECK(s1.empty());
  CHECK(c1->tensors == intact->tensors);
  // A newer build's manifest.
  auto v3 = original;
  v3.replace(v3.find("\"version\": 2"), 12, "\"version\": 3");
  auto [c3, s3] = with(v3);
  CHECK(c3->step == 2);
  REQUIRE(s3.size() == 1);
  CHECK(s3[0].find("format version 3: this build reads versions 1 and 2") !=
        std::string::npos);
  // One file's count edited (the total kept): refused.
  auto counted = original;
  const auto at = counted.find("\"tensors\": ", counted.find("\"files\""));
  REQUIRE(at != std::string::npos);
  counted.insert(at + 11, "1");
  auto [cc, sc] = with(counted);
  CHECK(cc->step == 2);
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].find("tensors, and the manifest counts 1") != std::string::npos);
}

TEST_CASE("a checkpoint whose manifest agrees with itself without one stage's file is "
          "passed over for the one before it, and a named pipe in a checkpoint is "
          "refused at once, never waited on",
          "[actors]") {
  const scratch_dir dir;
  checkpoints_2_and_4(dir.path());
  auto cfg = small(model_kind::gpt, 2);
  cfg.steps = 6;
  const auto step4 = dir.path() + "/step-00000004";
  const auto original = text_of(step4 + "/manifest.json");
  std::string error;
  auto m = parse_manifest(original, error);
  REQUIRE(m);
  REQUIRE(m->m.files.size() == 2);
  m->m.files.pop_back(); // and the total counted anew: a consistent manifest
  std::ofstream(step4 + "/manifest.json", std::ios::binary | std::ios::trunc)
      << format_manifest(m->m);
  auto r = run_embedded(cfg, resuming(dir.path()));
  INFO((r ? std::string() : describe(r.error())));
  REQUIRE(r);
  REQUIRE_FALSE(r->steps.empty());
  CHECK(r->steps.front().step == 2);
  // The manifest, then a shard, as a FIFO that nobody writes.
  for (const char* name : {"manifest.json", "stage-1.safetensors"}) {
    INFO(name);
    const scratch_dir fresh;
    checkpoints_2_and_4(fresh.path());
    const auto step4 = fresh.path() + "/step-00000004";
    std::filesystem::remove(step4 + "/" + name);
    REQUIRE(::mkfifo((step4 + "/" + name).c_str(), 0600) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> skipped;
    auto c = load_latest_checkpoint(fresh.path(), skipped, error);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE(c);
    CHECK(c->step == 2);
    REQUIRE(skipped.size() == 1);
    INFO(skipped[0]);
    CHECK(skipped[0].find("not a regular file") != std::string::npos);
    CHECK(took < std::chrono::seconds(5));
  }
}
