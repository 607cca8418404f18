// bamboo against what users run today: the benchmark GPT as an ordinary
// PyTorch training script (bench/pytorch_gpt.py, Debian's python3-torch: the
// same LibTorch underneath) and as bamboo's S=1 embedded run, on the same token
// file, the same configuration and one thread each. Rounds alternate which
// goes first; each round's figure is its median step (warm-up steps left out),
// and the ratio is taken per round, then its median. Also prints both loss
// curves: the peer trains for real.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "bench/bench_util.hpp"
#include "log/log.hpp"

namespace bamboo::bench::peer_bench {
namespace {

constexpr int warmup_steps = 2;

struct peer_run {
  std::vector<double> seconds, losses;
};

// Runs a command; its standard output, or nullopt when it failed.
std::optional<std::string> capture(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (!p)
    return std::nullopt;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;)
    out.append(buf, n);
  if (pclose(p) != 0)
    return std::nullopt;
  return out;
}

// The value of "key": in one JSON line of the script's (flat numbers only).
double json_number(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\":");
  return at == std::string::npos ? 0 : std::atof(line.c_str() + at + key.size() + 3);
}

std::optional<peer_run> run_pytorch(const std::string& command) {
  auto out = capture(command);
  if (!out)
    return std::nullopt;
  peer_run r;
  std::size_t start = 0;
  for (std::size_t nl; (nl = out->find('\n', start)) != std::string::npos;
       start = nl + 1) {
    const auto line = out->substr(start, nl - start);
    r.seconds.push_back(json_number(line, "seconds"));
    r.losses.push_back(json_number(line, "loss"));
  }
  return r;
}

peer_run run_bamboo(const train_config& c) {
  auto r = run_embedded(c);
  if (!r) {
    std::fprintf(stderr, "bench: %s\n", describe(r.error()).c_str());
    std::exit(1);
  }
  peer_run out;
  for (const auto& s : r->steps) {
    out.seconds.push_back(s.seconds);
    out.losses.push_back(s.loss);
  }
  return out;
}

double median_step(const peer_run& r) {
  std::vector<double> t(r.seconds.begin() +
                            std::min<std::size_t>(warmup_steps, r.seconds.size()),
                        r.seconds.end());
  return median(t);
}

std::string curve(const std::vector<double>& losses) {
  std::string out;
  char buf[32];
  for (double l : losses) {
    std::snprintf(buf, sizeof(buf), "%s%.3f", out.empty() ? "" : " ", l);
    out += buf;
  }
  return out;
}

} // namespace

int bench_main(int argc, char** argv) {
  int rounds = 5, steps = 8;
  std::string python = "/usr/bin/python3";
  std::string script = BAMBOO_SOURCE_DIR "/bench/pytorch_gpt.py";
  CLI::App app{"bamboo-bench-peer: bamboo's S=1 step against a plain PyTorch script"};
  app.add_option("--rounds", rounds, "interleaved rounds")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--steps", steps, "steps per run (the first 2 are warm-up)")
      ->check(CLI::Range(3, 10000))
      ->capture_default_str();
  app.add_option("--python", python, "an interpreter with torch (Debian's python3-torch)")
      ->capture_default_str();
  app.add_option("--script", script, "the PyTorch script")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  log::set_level("warn");

  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "bamboo_peer_XXXXXX").string();
  if (!mkdtemp(dir.data())) {
    std::perror("bench: mkdtemp");
    return 1;
  }
  const std::string data = dir + "/tokens.bin";
  if (!capture(python + " " + script + " --write-data " + data)) {
    std::fprintf(stderr,
                 "bench: %s %s --write-data failed (is python3-torch installed? "
                 "apt-get install python3-torch)\n",
                 python.c_str(), script.c_str());
    fs::remove_all(dir);
    return 1;
  }
  auto c = bench::benchmark_gpt(1);
  c.data = data;
  c.steps = steps;
  // One thread each: torch.set_num_threads(1) leaves OpenBLAS at one thread
  // per core (a script as written uses 2 here), so the peer is told too.
  const std::string peer = "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 " + python + " " +
                           script + " --data " + data + " --steps " +
                           std::to_string(steps) + " --threads 1";
  std::printf("model: gpt, %d blocks, d_model %d, %d heads, seq %d, G=%d m=%d, dropout "
              "%.1f, one thread; %d rounds of %d steps on the same token file\n",
              c.model.layers, c.model.d_model, c.model.heads, c.model.seq_len,
              c.global_batch, c.micro_batch, c.model.dropout, rounds, steps);
  std::fflush(stdout);
  std::vector<double> ours, theirs, ratio;
  peer_run last_ours, last_theirs;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 2; ++i) {
      if ((i == 0) == (round % 2 == 0)) {
        last_ours = run_bamboo(c);
      } else {
        auto r = run_pytorch(peer);
        if (!r || r->seconds.size() != static_cast<std::size_t>(steps)) {
          std::fprintf(stderr, "bench: the PyTorch script failed: %s\n", peer.c_str());
          fs::remove_all(dir);
          return 1;
        }
        last_theirs = std::move(*r);
      }
    }
    ours.push_back(median_step(last_ours));
    theirs.push_back(median_step(last_theirs));
    ratio.push_back(ours.back() / theirs.back());
  }
  fs::remove_all(dir);
  std::printf("step, bamboo S=1:          %s\n", bench::spread(ours).c_str());
  std::printf("step, PyTorch script:      %s\n", bench::spread(theirs).c_str());
  std::printf("bamboo / PyTorch, per round: %s\n", bench::spread(ratio, "").c_str());
  const double r = median(ratio);
  std::printf("step time bamboo S=1 / PyTorch script: %.3f  (goal <= 0.90, %s)\n", r,
              r <= 0.9 ? "met" : "MISSED");
  std::printf("losses, bamboo:  %s\n", curve(last_ours.losses).c_str());
  std::printf("losses, PyTorch: %s\n", curve(last_theirs.losses).c_str());
  return 0;
}

} // namespace bamboo::bench::peer_bench
