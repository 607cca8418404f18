// Goodput under preemptions across real processes: committed samples per
// second of wall time, for lazy and eager redundancy and for the
// checkpoint-restart baseline (redundancy off: every loss rolls back to the
// newest checkpoint, and a replacement worker comes 5 s after the kill), with
// a checkpoint every 10 steps and a kill -9 every 20 steps. One run each, on
// the same model, steps and kills; the ratios are to the fault-free run's
// throughput measured in the same invocation. The peer is what a PyTorch user
// runs today: the same GPT trained by 2 Gloo ranks (DDP) in a restart loop
// from its own checkpoints (bench/pytorch_elastic.py), with the same kills, its
// replacement after 5 s as ours, and at once (its best case).
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench/bench_util.hpp"
#include "bench/watched_child.hpp"

namespace bamboo::bench::goodput_bench {
namespace {

constexpr int steps = 50, global_batch = 8, every = 10;

struct row {
  long step;
  double seconds;
  std::string event;
};

std::vector<row> read_rows(const std::string& csv) {
  std::vector<row> out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const auto cells = csv_cells(line);
    if (cells.size() >= 8)
      out.push_back({std::stol(cells[0]), std::stod(cells[6]), cells[7]});
  }
  return out;
}

struct outcome {
  bool ok = false;
  double wall = 0, goodput = 0;
  double detect = 0, recover = 0, redo = 0; // seconds, summed over the kills
  int kills = 0, rollbacks = 0;
};

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The kills of a run with `count` of them in its 50 steps: one mid-run, or two
// of non-adjacent workers (steps 15 and 35).
std::vector<int> kill_steps(int count) {
  return count == 0   ? std::vector<int>{}
         : count == 1 ? std::vector<int>{25}
                      : std::vector<int>{15, 35};
}

outcome run(const char* train_bin, const std::string& redundancy, int kills = 0) {
  const std::string tag = "/tmp/bamboo_bench_goodput_" + std::to_string(getpid());
  const std::string csv = tag + ".csv", dir = tag + "_ckpt";
  std::vector<std::string> args{train_bin,
                                "--processes",
                                "--stages",
                                "4",
                                "--layers",
                                "4",
                                "--d-model",
                                "64",
                                "--heads",
                                "4",
                                "--seq-len",
                                "64",
                                "--micro-batch",
                                "2",
                                "--global-batch",
                                std::to_string(global_batch),
                                "--steps",
                                std::to_string(steps),
                                "--threads",
                                "1",
                                "--log-level",
                                "warn",
                                "--redundancy",
                                redundancy,
                                "--metrics",
                                csv,
                                "--checkpoint-dir",
                                dir,
                                "--checkpoint-every",
                                std::to_string(every),
                                "--keep",
                                "2"};
  const auto at = kill_steps(kills);
  for (std::size_t i = 0; i < at.size(); ++i) // nodes 1 then 3: never neighbours
    args.insert(args.end(),
                {"--preempt", "node=" + std::to_string(1 + 2 * static_cast<int>(i)) +
                                  "@step=" + std::to_string(at[i])});
  if (redundancy == "off")
    args.insert(args.end(), {"--replace-after-s", "5", "--replacement-wait-s", "60"});
  outcome o;
  {
    watched_child child(args);
    if (child.wait_exit(std::chrono::seconds(600)) != 0)
      return o;
    // Wall time from the manager's first listening (the same start-up for all).
    const auto end = clock_type::now();
    const auto listening =
        child.matches(std::regex(R"(bamboo-manager \(pid \d+\) listens)"));
    if (listening.empty())
      return o;
    o.wall = seconds(listening.front().first, end);
    const auto killed = child.matches(std::regex("kill -9 of node"));
    const auto lost = child.matches(
        std::regex(R"(\[bamboo.manager\] \[warning\] node \d+ lost in step)"));
    const auto rolled = child.matches(std::regex("rolled back to the checkpoint"));
    const auto steps_printed = child.matches(std::regex(R"(^step \d+ \()"));
    o.kills = static_cast<int>(killed.size());
    o.rollbacks = static_cast<int>(rolled.size());
    for (std::size_t i = 0; i < killed.size() && i < lost.size(); ++i)
      o.detect += seconds(killed[i].first, lost[i].first);
    // The baseline's recovery: from the loss to the first step of the new plan
    // (the replacement's wait, the restart and the load from the checkpoint).
    for (std::size_t i = 0; i < rolled.size() && i < lost.size(); ++i)
      for (const auto& [t, text] : steps_printed)
        if (t > rolled[i].first) {
          o.recover += seconds(lost[i].first, t);
          break;
        }
  }
  const auto rows = read_rows(csv);
  std::vector<double> normal;
  std::map<long, int> seen;
  for (const auto& r : rows)
    ++seen[r.step];
  std::map<long, int> first;
  for (const auto& r : rows) {
    if (r.event.empty() && r.step >= 2)
      normal.push_back(r.seconds);
    // Steps that ran twice: the first run was undone and redone.
    if (seen[r.step] > 1 && first[r.step]++ == 0)
      o.redo += r.seconds;
  }
  const double step = median(normal);
  for (const auto& r : rows)
    if (r.event == "failover") // lazy/eager: the failover step's extra time
      o.recover += std::max(0.0, r.seconds - step);
  o.goodput = steps * global_batch / o.wall;
  o.ok = true;
  std::remove(csv.c_str());
  std::system(("rm -rf " + dir).c_str());
  return o;
}

// The restart-loop peer (bench/pytorch_elastic.py): 2 Gloo ranks (DDP) of the
// same GPT, restarted from their checkpoint (every 10 steps) when a rank dies,
// with the same kills, its replacement after `replace_s`.
struct peer_outcome {
  bool ok = false;
  double wall = 0, goodput = 0;
  int restarts = 0, redone = 0;
  double detect = 0, recover = 0, redo = 0; // seconds, summed over the kills
};

double json_number(const std::string& line, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\": (-?[0-9.e+-]+)");
  return std::regex_search(line, m, re) ? std::stod(m.str(1)) : -1;
}

peer_outcome run_peer(const std::string& data, int kills, double replace_s) {
  const std::string dir = "/tmp/bamboo_bench_goodput_peer_" + std::to_string(getpid());
  std::system(("rm -rf " + dir).c_str());
  std::vector<std::string> args{"/usr/bin/python3",
                                BAMBOO_SOURCE_DIR "/bench/pytorch_elastic.py",
                                "--data",
                                data,
                                "--checkpoint-dir",
                                dir,
                                "--checkpoint-every",
                                std::to_string(every),
                                "--steps",
                                std::to_string(steps),
                                "--global-batch",
                                std::to_string(global_batch),
                                "--replace-after-s",
                                std::to_string(replace_s)};
  for (int k : kill_steps(kills))
    args.insert(args.end(), {"--kill-at", std::to_string(k)});
  peer_outcome o;
  watched_child child(args);
  if (child.wait_exit(std::chrono::seconds(600)) != 0)
    return o;
  const auto done = child.matches(std::regex(R"("done": true)"));
  if (done.empty())
    return o;
  o.wall = json_number(done.front().second, "wall");
  o.restarts = static_cast<int>(json_number(done.front().second, "restarts"));
  o.redone = static_cast<int>(json_number(done.front().second, "redone"));
  o.goodput = steps * global_batch / o.wall;
  // Per kill: to the end of the group (the survivor fails in a collective), from
  // there to the first step after the restart, and the steps redone.
  std::vector<double> step_s, kill_at, failed_at, restart_at, step_at;
  for (const auto& [t, line] : child.matches(std::regex(R"("step": \d+, "loss")"))) {
    step_s.push_back(json_number(line, "seconds"));
    step_at.push_back(json_number(line, "wall"));
  }
  for (const auto& [t, line] : child.matches(std::regex(R"(^\{"kill")")))
    kill_at.push_back(json_number(line, "wall"));
  for (const auto& [t, line] : child.matches(std::regex(R"(^\{"restart")"))) {
    failed_at.push_back(json_number(line, "failed"));
    restart_at.push_back(json_number(line, "wall"));
  }
  for (std::size_t i = 0; i < kill_at.size() && i < restart_at.size(); ++i) {
    o.detect += failed_at[i] - kill_at[i];
    for (double at : step_at)
      if (at > restart_at[i]) {
        o.recover += at - failed_at[i];
        break;
      }
  }
  o.redo = o.redone * median(step_s);
  std::system(("rm -rf " + dir).c_str());
  o.ok = true;
  return o;
}

// Goodput (over the system's own fault-free throughput) against preemptions
// per 100 steps, one line per system, as an SVG.
using series = std::map<std::string, std::map<int, double>>; // name -> rate -> ratio

bool write_plot(const std::string& path, const series& lines) {
  std::ofstream out(path);
  const double W = 640, H = 380, left = 60, right = 210, top = 30, bottom = 50;
  const double pw = W - left - right, ph = H - top - bottom;
  const double xmax = 4, ymax = 1.2;
  auto X = [&](double x) { return left + pw * x / xmax; };
  auto Y = [&](double y) { return top + ph * (1 - y / ymax); };
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"18\" font-size=\"13\">Goodput under kill -9 "
      << "(GPT, 50 steps, one run per point)</text>\n";
  for (double y = 0; y <= ymax + 1e-9; y += 0.2) {
    out << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << Y(y)
        << "\" y2=\"" << Y(y) << "\" stroke=\"#ddd\"/>\n"
        << "<text x=\"" << left - 8 << "\" y=\"" << Y(y) + 4 << "\" text-anchor=\"end\">"
        << y << "</text>\n";
  }
  for (int x = 0; x <= 4; x += 2)
    out << "<text x=\"" << X(x) << "\" y=\"" << top + ph + 18
        << "\" text-anchor=\"middle\">" << x << "</text>\n";
  out << "<line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top << "\" y2=\""
      << top + ph << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << top + ph
      << "\" y2=\"" << top + ph << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 10
      << "\" text-anchor=\"middle\">preemptions per 100 steps</text>\n"
      << "<text transform=\"translate(16," << top + ph / 2
      << ") rotate(-90)\" text-anchor=\"middle\">goodput / own fault-free</text>\n";
  const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e"};
  int i = 0;
  for (const auto& [name, points] : lines) {
    const char* c = colors[i % 5];
    std::string pts;
    for (const auto& [x, y] : points)
      pts += std::to_string(X(x)) + "," + std::to_string(Y(y)) + " ";
    out << "<polyline fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\" points=\""
        << pts << "\"/>\n";
    for (const auto& [x, y] : points)
      out << "<circle cx=\"" << X(x) << "\" cy=\"" << Y(y) << "\" r=\"3.5\" fill=\"" << c
          << "\"/>\n";
    const double ly = top + 10 + 20 * i;
    out << "<line x1=\"" << left + pw + 15 << "\" x2=\"" << left + pw + 35 << "\" y1=\""
        << ly << "\" y2=\"" << ly << "\" stroke=\"" << c << "\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << left + pw + 40 << "\" y=\"" << ly + 4 << "\">" << name
        << "</text>\n";
    ++i;
  }
  out << "</svg>\n";
  return static_cast<bool>(out);
}

} // namespace

int bench_main(int argc, char** argv) {
  // --plot FILE.svg: also one kill per run, for goodput against the rate.
  const std::string plot = argc == 3 && std::string(argv[1]) == "--plot" ? argv[2] : "";
  if (argc > 1 && plot.empty()) {
    std::fprintf(stderr, "usage: bamboo-bench-goodput [--plot FILE.svg]\n");
    return 2;
  }
  series lines; // preemptions per 100 steps (2 per kill in 50 steps) -> ratio
  std::printf("goodput across processes: GPT, S=4, %d steps of %d samples, a "
              "checkpoint every %d steps, kill -9 of a worker in steps 15 and 35 "
              "(one run each)\n",
              steps, global_batch, every);
  run(BAMBOO_TRAIN_BIN, "lazy"); // warm-up: the page cache, the first start
  const auto clean = run(BAMBOO_TRAIN_BIN, "lazy");
  if (!clean.ok) {
    std::printf("the fault-free run failed\n");
    return 1;
  }
  std::printf("  fault-free (lazy)    %7.2f samples/s over %.1f s of wall time (after a "
              "warm-up run)\n",
              clean.goodput, clean.wall);
  bool ok = true;
  std::map<std::string, double> goodput;
  for (const auto& [name, mode] : std::vector<std::pair<std::string, std::string>>{
           {"lazy", "lazy"}, {"eager", "eager"}, {"checkpoint-restart", "off"}}) {
    const auto o = run(BAMBOO_TRAIN_BIN, mode, 2);
    if (!o.ok) {
      std::printf("  %-20s failed\n", name.c_str());
      ok = false;
      continue;
    }
    goodput[name] = o.goodput;
    lines["bamboo " + name][0] = 1;
    lines["bamboo " + name][4] = o.goodput / clean.goodput;
    if (!plot.empty()) {
      const auto one = run(BAMBOO_TRAIN_BIN, mode, 1);
      if (one.ok)
        lines["bamboo " + name][2] = one.goodput / clean.goodput;
    }
    std::printf("  %-20s %7.2f samples/s, ratio %.3f to fault-free; %d kills, %d "
                "rollbacks; detecting %.2f s, recovering %.2f s, redoing %.2f s\n",
                name.c_str(), o.goodput, o.goodput / clean.goodput, o.kills, o.rollbacks,
                o.detect, o.recover, o.redo);
  }
  // The peer: an ordinary PyTorch job's restart loop, on the same model and kills.
  const std::string data = "/tmp/bamboo_bench_goodput_tokens_" + std::to_string(getpid());
  if (std::system(("/usr/bin/python3 " BAMBOO_SOURCE_DIR
                   "/bench/pytorch_gpt.py --write-data " +
                   data)
                      .c_str()) != 0) {
    std::printf("  pytorch restart loop: skipped (needs /usr/bin/python3 with "
                "python3-torch: apt-get install python3-torch)\n");
  } else {
    run_peer(data, 0, 0); // warm-up: the page cache, Python's first start
    const auto peer_clean = run_peer(data, 0, 0);
    if (!peer_clean.ok) {
      std::printf("  pytorch fault-free run failed\n");
      ok = false;
    } else {
      std::printf(
          "  pytorch DDP, 2 ranks, fault-free %7.2f samples/s over %.1f s of wall "
          "time\n",
          peer_clean.goodput, peer_clean.wall);
      for (double replace_s : {5.0, 0.0}) {
        const auto o = run_peer(data, 2, replace_s);
        char name[64];
        std::snprintf(name, sizeof name, "pytorch restart (replacement %.0f s)",
                      replace_s);
        if (!o.ok) {
          std::printf("  %s failed\n", name);
          ok = false;
          continue;
        }
        goodput[name] = o.goodput;
        if (replace_s > 0) { // the setting of ours
          lines["pytorch restart loop"][0] = 1;
          lines["pytorch restart loop"][4] = o.goodput / peer_clean.goodput;
          if (!plot.empty()) {
            const auto one = run_peer(data, 1, replace_s);
            if (one.ok)
              lines["pytorch restart loop"][2] = one.goodput / peer_clean.goodput;
          }
        }
        std::printf("  %-36s %7.2f samples/s, ratio %.3f to its fault-free; %d "
                    "restarts, %d steps redone; detecting %.2f s, recovering %.2f s "
                    "(the replacement's wait included), redoing %.2f s\n",
                    name, o.goodput, o.goodput / peer_clean.goodput, o.restarts, o.redone,
                    o.detect, o.recover, o.redo);
        if (goodput.count("lazy"))
          std::printf("    ratio of its fault-free throughput kept, bamboo lazy over it: "
                      "%.2f\n",
                      (goodput["lazy"] / clean.goodput) /
                          (o.goodput / peer_clean.goodput));
      }
    }
    std::remove(data.c_str());
  }
  if (!plot.empty()) {
    std::printf("  goodput / own fault-free against preemptions per 100 steps:\n");
    for (const auto& [name, points] : lines) {
      std::printf("    %-28s", name.c_str());
      for (const auto& [x, y] : points)
        std::printf("  %d: %.3f", x, y);
      std::printf("\n");
    }
    if (!write_plot(plot, lines)) {
      std::printf("  cannot write %s\n", plot.c_str());
      ok = false;
    } else {
      std::printf("  plot: %s\n", plot.c_str());
    }
  }
  if (goodput.count("lazy") && goodput.count("checkpoint-restart"))
    std::printf("  lazy / checkpoint-restart %.2f, eager / checkpoint-restart %.2f\n"
                "  (on 2 cores, fewer worker processes after a kill contend less: a "
                "ratio above 1 to fault-free is that, not a gain)\n",
                goodput["lazy"] / goodput["checkpoint-restart"],
                goodput["eager"] / goodput["checkpoint-restart"]);
  return ok ? 0 : 1;
}

} // namespace bamboo::bench::goodput_bench
