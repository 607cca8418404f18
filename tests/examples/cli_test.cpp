// bamboo-train as users meet it: bad input gets one line and exit status 2.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actors/plan/sample_ledger.hpp"
#include "model/checkpoint_manifest.hpp"
#include "model/data.hpp"
#include "tests/run_command.hpp"
#include "tests/scratch_dir.hpp"

namespace {

using bamboo::test::outcome;
using bamboo::test::run_command;
using bamboo::test::scratch_dir;

outcome run_train(const std::string& args) {
  return run_command(std::string(BAMBOO_TRAIN_BIN) + " " + args);
}

void check_rejected(const std::string& args, const std::string& needle) {
  INFO("bamboo-train " << args);
  auto r = run_train(args);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(needle) != std::string::npos);
  CHECK(r.output.find("error") != std::string::npos);
  // One line: the message and its newline, nothing else.
  CHECK(r.output.find('\n') == r.output.size() - 1);
}

} // namespace

TEST_CASE("bamboo-train rejects bad input in one line with exit status 2", "[examples]") {
  check_rejected("--no-such-option", "--no-such-option");
  check_rejected("--stages 9", "exceeds");
  check_rejected("--global-batch 10 --micro-batch 4", "multiple of --micro-batch");
  check_rejected("--data /nonexistent/tokens.bin", "cannot read");
  check_rejected("--tls-cert a.pem --tls-key a.key --tls-ca ca.pem",
                 "are for --processes");
  check_rejected("--processes --tls-cert /nonexistent.pem", "cannot be read");
  check_rejected("--data /tmp", "cannot read data file '/tmp'"); // a directory
  check_rejected("--d-model 100 --heads 3", "does not divide");
  check_rejected("--model gpt3", "--model");
  const scratch_dir dir;
  std::ofstream(dir.file("odd.bin"), std::ios::binary) << "abc";
  check_rejected("--data " + dir.file("odd.bin"), "odd length");
  check_rejected("--metrics /nonexistent/dir/m.csv --steps 1", "metrics");
  check_rejected("--preempt node=9@step=1", "node 9");
  check_rejected("--preempt sometimes", "--preempt 'sometimes'");
  check_rejected("--redundancy always", "--redundancy");
  check_rejected("--processes --stages 1", "--stages 2 or more");
  check_rejected("--processes --stages 2 --preempt rate=1", "rate=R is for embedded");
  check_rejected("--checkpoint-every 2", "need --checkpoint-dir");
  check_rejected("--resume", "need --checkpoint-dir");
  check_rejected("--checkpoint-dir " + dir.path() + " --checkpoint-every 0",
                 "--checkpoint-every");
  check_rejected("--checkpoint-dir /etc/passwd/ckpt --checkpoint-every 2",
                 "cannot create the directory /etc/passwd/ckpt");
  check_rejected("--processes --stages 4 --workers 3", "--workers 3 is below --stages 4");
  check_rejected("--processes --stages 2 --steps 3 --join step=3", "past the run");
  check_rejected("--processes --stages 2 --join step=1,count=0", "C from 1 to 64");
  check_rejected("--processes --stages 2 --join soon", "expected step=K");
  check_rejected("--processes --stages 2 --join step=1,cnt=2", "expected step=K");
  check_rejected("--stages 2 --join step=1", "are for --processes");
  check_rejected("--stages 2 --workers 3", "are for --processes");
  std::ofstream(dir.file("unknown.csv")) << "0,add,a\n0,add,b\n5,launch,c\n";
  std::ofstream(dir.file("unordered.csv")) << "0,add,a\n0,add,b\n9,remove,a\n5,add,c\n";
  std::ofstream(dir.file("small.csv")) << "0,add,a\n7,add,b\n";
  check_rejected("--processes --stages 2 --spot-trace " + dir.file("unknown.csv"),
                 "unknown.csv:3: '5,launch,c' is not 'delta_ms,add|remove,node'");
  check_rejected("--processes --stages 2 --spot-trace " + dir.file("unordered.csv"),
                 "unordered.csv:4: time 5 goes back (previous 9)");
  check_rejected("--processes --stages 2 --spot-trace " + dir.file("small.csv"),
                 "the trace starts with 1 instance(s) in 8 worker slots, fewer than "
                 "--stages 2");
  check_rejected("--processes --stages 2 --spot-trace /nonexistent.csv", "cannot read");
  check_rejected("--processes --stages 2 --zones a,,b", "a comma-separated list");
  check_rejected("--stages 2 --zones a,b", "--zones is for --processes");
  check_rejected("--processes --stages 4 --spot-trace " + dir.file("unknown.csv") +
                     " --max-workers 3",
                 "--max-workers 3 is below --stages 4");
  check_rejected("--stages 2 --spot-trace " + dir.file("unknown.csv"),
                 "are for --processes");
  check_rejected("--steps 0", "--steps must be 1 or more");
  check_rejected("--processes --stages 2 --transport local", "--transport local");
  check_rejected("--stages 3 --min-stages 3 --max-stages 2",
                 "--min-stages 3 is above --max-stages 2");
  check_rejected("--stages 2 --min-stages 3", "--min-stages 3 is above --max-stages 2");
  check_rejected("--layers 2 --stages 4 --max-stages 5",
                 "--max-stages 5 is above the model's 4 layers");
  check_rejected("--stages 4 --min-stages 2 --max-stages 3",
                 "--stages 4 is outside --min-stages 2 to --max-stages 3");
  check_rejected("--processes --stages 3 --min-stages 1",
                 "--min-stages 1 is below 2 (the fewest stages this mode runs)");
  check_rejected("--stages 4 --pipelines 3 --nodes 4",
                 "--nodes 4 does not hold --pipelines 3 x --stages 4");
  check_rejected("--stages 4 --pipelines auto --nodes 3",
                 "--nodes 3 cannot hold one pipeline of --stages 4");
  check_rejected("--pipelines two", "--pipelines 'two': a positive number or auto");
  check_rejected("--pipelines 0", "--pipelines '0'");
  check_rejected("--stages 2 --pipelines 3 --global-batch 16 --micro-batch 4",
                 "4 micro-batches per step, which 3 pipelines cannot share equally");
  check_rejected("--stages 2 --pipelines 2 --min-stages 1",
                 "cannot be combined with --pipelines above 1");
  check_rejected("--processes --stages 4 --pipelines 3 --workers 4",
                 "--workers 4 cannot hold --pipelines 3 x --stages 4");
  check_rejected("--processes --stages 2 --nodes 2", "--nodes is for embedded mode");
}

TEST_CASE("bamboo-train stops with status 3 when neighbours die in one step",
          "[examples]") {
  auto r = run_train("--steps 4 --stages 4 --quiet --log-level off --preempt "
                     "node=1@step=1.op=0 --preempt node=2@step=1.op=1");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(r.output.find("fatal") != std::string::npos);
  CHECK(r.output.find("checkpoint") != std::string::npos);
  CHECK(r.output.find('\n') == r.output.size() - 1);
}

TEST_CASE("bamboo-train survives injected preemptions and summarises them",
          "[examples]") {
  const scratch_dir dir;
  const auto csv = dir.file("failover.csv");
  auto r = run_train("--steps 6 --stages 4 --redundancy eager --log-level warn "
                     "--preempt node=1@step=2.op=3 --preempt node=3@step=4 --metrics " +
                     csv);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("2 preemption(s) survived") != std::string::npos);
  std::ifstream in(csv);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  CHECK(all.find(",preempted+failover") != std::string::npos);
  CHECK(all.find(",degraded") != std::string::npos);
}

TEST_CASE("bamboo-train warns once of a preemption past the run and trains",
          "[examples]") {
  auto r = run_train("--steps 3 --stages 2 --quiet --log-level off --preempt "
                     "node=1@step=99");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("bamboo-train: warning: --preempt node=1@step=99: step 99 is past "
                      "the run (3 steps, 0 to 2): it will not happen") !=
        std::string::npos);
  CHECK(r.output.find("0 preemption(s) survived") != std::string::npos);
}

TEST_CASE("bamboo-train prints the schedule with FRC slots marked", "[examples]") {
  auto r = run_train("--print-schedule --stages 4 --redundancy eager");
  REQUIRE(r.status == 0);
  CHECK(r.output.find("stage 3 |") != std::string::npos);
  CHECK(r.output.find("R0") != std::string::npos);
  // Numbered, for --preempt ...op=J; the last number is the optimizer update.
  CHECK(r.output.find("stage 3 instructions: 0=F0 1=B0 ") != std::string::npos);
  CHECK(r.output.find("=update\n") != std::string::npos);
  auto off = run_train("--print-schedule --stages 2 --redundancy off");
  REQUIRE(off.status == 0);
  CHECK(off.output.find("R =") == std::string::npos); // no FRC slots to explain
  CHECK(off.output.find("R0") == std::string::npos);
}

TEST_CASE("bamboo-train trains and writes a metrics CSV", "[examples]") {
  const scratch_dir dir;
  const auto csv = dir.file("metrics.csv");
  auto r = run_train("--steps 3 --stages 2 --quiet --log-level warn --metrics " + csv);
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  CHECK(header.rfind("step,loss,samples_per_s,generation", 0) == 0);
  int rows = 0;
  while (std::getline(in, line))
    ++rows;
  CHECK(rows == 3);
  CHECK(run_train("--help").status == 0);
}

TEST_CASE("a symbolic link planted at the metrics or ledger name is refused and its "
          "target left as it was, and one at the digests name is replaced, not followed",
          "[examples]") {
  const scratch_dir dir;
  const auto victim = dir.file("victim.txt");
  std::ofstream(victim) << "precious\n";
  auto text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const char* option : {"--metrics", "--ledger"}) {
    const auto link = dir.file(std::string(option + 2) + "-link");
    std::filesystem::create_symlink(victim, link);
    auto r = run_train(std::string("--steps 2 --stages 2 --quiet --log-level warn ") +
                       option + " " + link);
    INFO(option << ": " << r.output);
    CHECK(r.status != 0);
    CHECK(r.output.find("a symbolic link (refused)") != std::string::npos);
    CHECK(text(victim) == "precious\n");
  }
  const auto digests = dir.file("digests-link");
  std::filesystem::create_symlink(victim, digests);
  auto r = run_train("--steps 2 --stages 2 --quiet --log-level warn --state-digests " +
                     digests);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(text(victim) == "precious\n");
  CHECK_FALSE(std::filesystem::is_symlink(digests));
  CHECK(text(digests).rfind("role,name,count,digest\n", 0) == 0);
}

TEST_CASE("an embedded run's ledger verifies, and bamboo-ledger names a repeated step, "
          "a missing step and a damaged file",
          "[examples]") {
  const scratch_dir dir;
  const auto ledger = dir.file("ledger.txt");
  auto r = run_train("--steps 6 --stages 3 --layers 3 --quiet --log-level warn "
                     "--preempt node=1@step=2 --ledger " +
                     ledger);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string verify = std::string(BAMBOO_LEDGER_BIN) + " verify ";
  auto ok = run_command(verify + ledger);
  INFO(ok.output);
  CHECK(ok.status == 0);
  CHECK(ok.output.find("6 steps stand, 0 rolled back") != std::string::npos);
  CHECK(ok.output.find("steps 0-1, generation 1: stage owners 0 1 2, shadows 2 0 1") !=
        std::string::npos);
  CHECK(ok.output.find("exactly once") != std::string::npos);

  std::vector<std::string> lines;
  {
    std::ifstream in(ledger);
    for (std::string l; std::getline(in, l);)
      lines.push_back(l);
  }
  REQUIRE(lines.size() == 7);
  auto write = [&](const std::string& name, std::vector<std::string> ls) {
    const auto path = dir.file(name);
    std::ofstream out(path);
    for (const auto& l : ls)
      out << l << "\n";
    return path;
  };
  auto repeated = lines;
  repeated.push_back(lines[3]); // step 2 again, no rollback
  auto twice = run_command(verify + write("twice.txt", repeated));
  CHECK(twice.status == 1);
  CHECK(twice.output.find("violation: step 2 committed twice") != std::string::npos);
  auto missing = lines;
  missing.erase(missing.begin() + 4); // step 3
  auto gap = run_command(verify + write("gap.txt", missing));
  CHECK(gap.status == 1);
  CHECK(gap.output.find("step 4 committed after step 2") != std::string::npos);
  auto damaged = lines;
  damaged[2] = "commit,1,1,8";
  auto bad = run_command(verify + write("bad.txt", damaged));
  CHECK(bad.status == 2);
  CHECK(bad.output.find("line 3: a malformed commit") != std::string::npos);
  CHECK(run_command(verify + dir.file("absent.txt")).status == 2);
}

TEST_CASE("crafted ledgers - a huge epoch or batch, a commit with a huge END, and 200 "
          "random mutations - end with exit 2 and a message naming the file, never an "
          "abort",
          "[examples]") {
  const scratch_dir dir;
  const auto ledger = dir.file("ledger.txt");
  // G=16 (the default): the first commit takes [0,16).
  auto r = run_train(
      "--steps 4 --stages 2 --layers 2 --quiet --log-level warn --ledger " + ledger);
  REQUIRE(r.status == 0);
  std::vector<std::string> lines;
  {
    std::ifstream in(ledger);
    for (std::string l; std::getline(in, l);)
      lines.push_back(l);
  }
  REQUIRE(lines.size() >= 3);
  const std::string verify = std::string(BAMBOO_LEDGER_BIN) + " verify ";
  auto write = [&](const std::string& name, const std::vector<std::string>& ls) {
    const auto path = dir.file(name);
    std::ofstream out(path);
    for (const auto& l : ls)
      out << l << "\n";
    return path;
  };
  auto replaced = [&](std::size_t line, const std::string& from, const std::string& to) {
    auto ls = lines;
    const auto at = ls[line].find(from);
    REQUIRE(at != std::string::npos);
    ls[line].replace(at, from.size(), to);
    return ls;
  };
  const auto epoch = lines[0].substr(lines[0].find("samples_per_epoch="));
  const auto epoch_value = epoch.substr(0, epoch.find(','));
  for (const auto& [name, ls] :
       {std::pair{"epoch",
                  replaced(0, epoch_value, "samples_per_epoch=9223372036854775807")},
        std::pair{"batch", replaced(0, "global_batch=", "global_batch=4611686018427387")},
        std::pair{"end", replaced(1, ",16,", ",9223372036854775807,")},
        // 2^27 samples claimed by one commit line of a 104-byte file
        std::pair{"tiny", std::vector<std::string>{
                              "# bamboo ledger v1,seed=7,samples_per_epoch=134217728,"
                              "global_batch=134217728",
                              "commit,0,1,0,134217728,0,0"}}}) {
    const auto path = write(std::string(name) + ".txt", ls);
    auto v = run_command(verify + path);
    INFO(name << ": " << v.output);
    CHECK(v.status == 2);
    CHECK(v.output.find(path) != std::string::npos);
  }
  std::uint64_t seed = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  const std::vector<std::string> numbers{
      "9223372036854775807", "-1", "18446744073709551616", "134217728", "0", ",", ""};
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    auto ls = lines;
    auto& l = ls[next() % ls.size()];
    if (i % 2 == 0 && !l.empty()) {
      l[next() % l.size()] = static_cast<char>(32 + next() % 95);
    } else {
      // a number of the line replaced by an extreme one
      const auto at = l.find_first_of("0123456789", next() % (l.size() + 1));
      if (at != std::string::npos)
        l.replace(at, 1, numbers[next() % numbers.size()]);
    }
    // In-process, as bamboo-ledger verify reads and checks it: a refusal with a
    // reason, or a verdict; never an abort (the sanitizer build runs this).
    std::string text;
    for (const auto& x : ls)
      text += x + "\n";
    std::istringstream in(text);
    std::string error;
    auto f = parse_ledger(in, error);
    INFO(text);
    if (!f) {
      ++refused;
      CHECK_FALSE(error.empty());
      continue;
    }
    sample_order order(f->header.seed, f->header.samples_per_epoch);
    auto v = verify_ledger(*f, [&](std::int64_t p) { return order.at(p); });
    CHECK((v.ok() || !v.problems.empty()));
  }
  INFO(refused << " of 200 refused");
  CHECK(refused > 20);
}

namespace {

void check_sim_rejected(const std::string& args, const std::string& needle) {
  INFO("bamboo-sim " << args);
  auto r = run_command(std::string(BAMBOO_SIM_BIN) + " " + args);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find(needle) != std::string::npos);
  CHECK(r.output.find('\n') == r.output.size() - 1);
}

} // namespace

TEST_CASE("bamboo-sim rejects bad traces and options with exit status 2", "[examples]") {
  const scratch_dir dir;
  std::ofstream(dir.file("bad.csv")) << "0,add,n1\n1000,add,n2\n2000,drop,n1\n";
  check_sim_rejected("--trace " + dir.file("bad.csv"), "bad.csv:3:");
  std::ofstream(dir.file("unknown.csv")) << "0,add,n1\n5,remove,n7\n";
  check_sim_rejected("--trace " + dir.file("unknown.csv"), "unknown node 'n7'");
  std::ofstream(dir.file("empty.csv")) << "\n";
  check_sim_rejected("--trace " + dir.file("empty.csv"), "empty");
  check_sim_rejected("--trace /nonexistent.csv", "cannot read");
  check_sim_rejected("", "--trace");
  check_sim_rejected("--generate sometimes", "--generate");
  check_sim_rejected("--generate hourly --duration soon", "--duration");
  check_sim_rejected("--generate hourly --policy magic", "--policy");
  // Options that would do nothing are refused, not ignored.
  check_sim_rejected("--generate hourly --redundancy eager",
                     "applies to --policy bamboo");
  check_sim_rejected("--generate hourly --zones 3", "apply to --policy bamboo only");
  check_sim_rejected("--generate hourly --policy bamboo --min-stages 13",
                     "--min-stages 13 is above the profile's 12 stages");
  check_sim_rejected("--trace " + dir.file("unknown.csv") + " --seeds 1..3",
                     "--seeds applies to generated traces");
  check_sim_rejected("--trace " + dir.file("unknown.csv") + " --capacity 8",
                     "--capacity applies to generated traces");
  check_sim_rejected("--generate hourly --model bert --profile x.txt", "--profile");
}

TEST_CASE("bamboo-sim replays a published trace and writes its outputs", "[examples]") {
  const std::string trace = std::string(BAMBOO_TRACES_DIR) + "/aws-p3-trace.csv";
  const scratch_dir dir;
  auto r = run_command(std::string(BAMBOO_SIM_BIN) + " --trace " + trace +
                       " --policy bamboo-nsdi23 --model gpt2 --duration 12h --summary " +
                       dir.file("sim.json") + " --series " + dir.file("sim.csv") +
                       " --plot " + dir.file("sim.svg"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(" hours ") != std::string::npos); // the table's duration
  CHECK(r.output.find("value: ") != std::string::npos); // and what value means
  std::ifstream in(dir.file("sim.json"));
  std::string json((std::istreambuf_iterator<char>(in)), {});
  CHECK(json.rfind("[\n{", 0) == 0); // an array even for one run
  for (auto key :
       {"\"steps\"", "\"preemptions\"", "\"fatal_failures\"", "\"mean_instances\"",
        "\"samples_per_s\"", "\"cost_per_h\"", "\"value\"", "\"hours\"", "\"seed\""})
    CHECK(json.find(key) != std::string::npos);
  std::ifstream svg(dir.file("sim.svg"));
  std::string plot((std::istreambuf_iterator<char>(svg)), {});
  CHECK(plot.find("<polyline") != std::string::npos);
}

TEST_CASE("a bamboo-sim policy grid plots every run on one time axis with a legend "
          "that fits and a useful-progress panel",
          "[examples]") {
  const std::string trace = std::string(BAMBOO_TRACES_DIR) + "/aws-p3-trace.csv";
  const scratch_dir dir;
  auto r = run_command(std::string(BAMBOO_SIM_BIN) + " --trace " + trace +
                       " --policy bamboo-nsdi23 --policy bamboo --policy "
                       "checkpoint-restart --policy on-demand --summary " +
                       dir.file("grid.json") + " --plot " + dir.file("grid.svg"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(dir.file("grid.json"));
  std::string json((std::istreambuf_iterator<char>(in)), {});
  std::size_t objects = 0;
  for (auto at = json.find("\"policy\""); at != std::string::npos;
       at = json.find("\"policy\"", at + 1))
    ++objects;
  CHECK(objects == 4);
  std::ifstream svg(dir.file("grid.svg"));
  std::string plot((std::istreambuf_iterator<char>(svg)), {});
  const auto width = std::stoi(plot.substr(plot.find("width=\"") + 7));
  std::set<std::string> strokes;
  for (auto label : {"bamboo-nsdi23", "bamboo/lazy", "checkpoint-restart", "on-demand"}) {
    // Each run in the legend, its text inside the canvas, in a colour of its own.
    const auto at = plot.find(std::string(">") + label + "</text>");
    REQUIRE(at != std::string::npos);
    const auto row = plot.rfind("<line", at);
    const auto x = std::stoi(plot.substr(plot.find(" x=\"", row) + 4));
    CHECK(x + 8 * static_cast<int>(std::string(label).size()) < width);
    strokes.insert(plot.substr(plot.find("stroke=\"", row) + 8, 7));
  }
  CHECK(strokes.size() == 4);
  CHECK(plot.find("useful progress") != std::string::npos);
  // The spot runs end at 11.4 h; on-demand (176 h to its target) is cut there:
  // no x tick past 12.
  CHECK(plot.find(">12</text>") == std::string::npos);
  CHECK(plot.find(">10</text>") != std::string::npos);
}

TEST_CASE("bamboo-sim says so when a run trains no step", "[examples]") {
  const scratch_dir dir;
  std::ofstream(dir.file("few.csv")) << "0,add,n1\n1000,add,n2\n";
  auto r = run_command(std::string(BAMBOO_SIM_BIN) + " --trace " + dir.file("few.csv") +
                       " --duration 1h");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("bamboo-nsdi23 (seed 1) trained no step: the trace never held a "
                      "whole pipeline of 12 instances") != std::string::npos);
}

TEST_CASE("a later option overrides an earlier one, as the demo's users expect, and "
          "--preempt adds",
          "[examples]") {
  const std::string small = "--layers 1 --d-model 32 --heads 2 --seq-len 16 "
                            "--micro-batch 2 --global-batch 4 --stages 2 ";
  auto r = run_train(small + "--steps 5 --steps 2");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("summary: 2 steps") != std::string::npos);
  // Both preemptions stand: after node 0's loss node 1 holds both stages, so
  // its loss is fatal (exit 3); had only the last one stood, the run would pass.
  r = run_train(small + "--steps 3 --redundancy lazy --preempt node=0@step=0 "
                        "--preempt node=1@step=1");
  INFO(r.output);
  CHECK(r.status == 3);
}

TEST_CASE("a metrics or ledger file that cannot be written is an error naming the file "
          "(exit 2 before training, 1 when a write fails mid-run), never a cut record "
          "and status 0",
          "[examples]") {
  const std::string tiny = "--layers 2 --d-model 32 --heads 2 --seq-len 16 --quiet ";
  if (std::ifstream("/dev/full")) { // every write fails: No space left on device
    for (const std::string what : {"metrics", "ledger"}) {
      auto r = run_train(tiny + "--steps 3 --" + what + " /dev/full");
      INFO(r.output);
      CHECK(r.status == 2);
      CHECK(r.output == "bamboo-train: error: cannot write " + what +
                            " file '/dev/full': No space left on device\n");
    }
  }
  // A file that fills up mid-run: a 4 KiB file size limit (SIGXFSZ ignored, so
  // the write fails with EFBIG instead of ending the process).
  scratch_dir dir;
  for (const std::string what : {"metrics", "ledger"}) {
    const auto file = dir.file(what + ".out");
    auto r = run_command("bash -c \"trap '' XFSZ; ulimit -f 4; exec " +
                         std::string(BAMBOO_TRAIN_BIN) + " " + tiny + "--steps 300 --" +
                         what + " " + file + "\"");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("bamboo-train: error: cannot write " + what + " file '" + file +
                        "': File too large\n") != std::string::npos);
  }
}

TEST_CASE("with the user's token --resume refuses a checkpoint whose shard was "
          "substituted with its SHA-256 recomputed - exit 2 naming the checkpoint",
          "[examples]") {
  const scratch_dir dir;
  const auto mine = dir.file("mine"), theirs = dir.file("theirs");
  const std::string token = "BAMBOO_TOKEN=a-user-token-0123456789abcdef ";
  const std::string run = " --steps 2 --stages 2 --layers 2 --quiet --log-level warn ";
  auto a = run_command(token + BAMBOO_TRAIN_BIN + run + "--checkpoint-dir " + mine);
  REQUIRE(a.status == 0);
  auto b = run_command(std::string("env -u BAMBOO_TOKEN ") + BAMBOO_TRAIN_BIN + run +
                       "--seed 99 --checkpoint-dir " + theirs);
  REQUIRE(b.status == 0);
  const auto step = "/step-00000002";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string error;
  auto m = parse_manifest(read(mine + step + "/manifest.json"), error);
  auto t = parse_manifest(read(theirs + step + "/manifest.json"), error);
  INFO(error);
  REQUIRE(m);
  REQUIRE(t);
  CHECK(m->m.mac.size() == 64); // keyed: the token was the user's
  CHECK(t->m.mac.empty());      // a run without one keys nothing
  const auto& shard = m->m.files[0];
  std::filesystem::copy_file(theirs + step + "/" + shard.file,
                             mine + step + "/" + shard.file,
                             std::filesystem::copy_options::overwrite_existing);
  for (const auto& f : t->m.files)
    if (f.file == shard.file) {
      m->m.files[0].sha256 = f.sha256;
      m->m.files[0].bytes = f.bytes;
    }
  std::ofstream(mine + step + "/manifest.json", std::ios::trunc) << format_manifest(m->m);
  auto resumed = run_command(token + BAMBOO_TRAIN_BIN +
                             " --steps 4 --stages 2 --layers 2 --quiet --log-level warn "
                             "--resume --checkpoint-dir " +
                             mine);
  INFO(resumed.output);
  CHECK(resumed.status == 2);
  CHECK(resumed.output.find("step-00000002") != std::string::npos);
  CHECK(resumed.output.find("keyed digest ('mac') does not match") != std::string::npos);
}
