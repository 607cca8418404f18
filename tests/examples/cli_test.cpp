// bamboo-train as users meet it: bad input gets one line and exit status 2.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace {

struct outcome {
  int status = -1;
  std::string output;
};

outcome run_train(const std::string& args) {
  std::string cmd = std::string(BAMBOO_TRAIN_BIN) + " " + args + " 2>&1";
  outcome out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p))
    out.output += buf.data();
  int st = pclose(p);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
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
  check_rejected("--d-model 100 --heads 3", "does not divide");
  check_rejected("--model gpt3", "--model");
  std::ofstream("/tmp/bamboo_cli_odd.bin", std::ios::binary) << "abc";
  check_rejected("--data /tmp/bamboo_cli_odd.bin", "odd length");
  check_rejected("--metrics /nonexistent/dir/m.csv --steps 1", "metrics");
  check_rejected("--preempt node=9@step=1", "node 9");
  check_rejected("--preempt sometimes", "--preempt 'sometimes'");
  check_rejected("--redundancy always", "--redundancy");
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
  auto r = run_train("--steps 6 --stages 4 --redundancy eager --log-level warn "
                     "--preempt node=1@step=2.op=3 --preempt node=3@step=4 --metrics "
                     "/tmp/bamboo_cli_failover.csv");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("2 preemptions survived") != std::string::npos);
  std::ifstream in("/tmp/bamboo_cli_failover.csv");
  std::string all((std::istreambuf_iterator<char>(in)), {});
  CHECK(all.find(",failover") != std::string::npos);
  CHECK(all.find(",degraded") != std::string::npos);
}

TEST_CASE("bamboo-train prints the schedule with FRC slots marked", "[examples]") {
  auto r = run_train("--print-schedule --stages 4 --redundancy eager");
  REQUIRE(r.status == 0);
  CHECK(r.output.find("stage 3 |") != std::string::npos);
  CHECK(r.output.find("R0") != std::string::npos);
}

TEST_CASE("bamboo-train trains and writes a metrics CSV", "[examples]") {
  auto r = run_train("--steps 3 --stages 2 --quiet --log-level warn --metrics "
                     "/tmp/bamboo_cli_metrics.csv");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in("/tmp/bamboo_cli_metrics.csv");
  std::string header, line;
  std::getline(in, header);
  CHECK(header.rfind("step,loss,samples_per_s,generation", 0) == 0);
  int rows = 0;
  while (std::getline(in, line))
    ++rows;
  CHECK(rows == 3);
  CHECK(run_train("--help").status == 0);
}
