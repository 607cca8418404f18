#include "examples/inspect/console.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "actors/errors.hpp"
#include "actors/net/inspect_command.hpp"
#include "actors/net/observer.hpp"

// Last: its macros (timeout, erase, move...) would rewrite CAF's and the
// standard library's names.
#include <curses.h>

namespace bamboo::app {

namespace {

constexpr int min_cols = 72, min_rows = 20;

// The losses as one character each, low to high.
std::string sparkline(const std::vector<double>& losses, std::size_t width) {
  static const std::string levels = "_.-:=+*#%@";
  if (losses.empty())
    return "";
  const auto first =
      losses.size() > width ? losses.end() - static_cast<long>(width) : losses.begin();
  const auto [lo, hi] = std::minmax_element(first, losses.end());
  std::string out;
  for (auto it = first; it != losses.end(); ++it) {
    const double f = *hi > *lo ? (*it - *lo) / (*hi - *lo) : 0.5;
    out += levels[static_cast<std::size_t>(f * static_cast<double>(levels.size() - 1))];
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

void put(int row, const std::string& text, int attr = A_NORMAL) {
  if (row >= LINES)
    return;
  attron(attr);
  mvaddnstr(row, 0, text.c_str(), COLS - 1);
  attroff(attr);
}

std::string node_words(std::int32_t node) {
  return node < 0 ? "-" : std::to_string(node);
}

// Rows for each section: the map and the members get a share of what the
// header, the answer and the prompt leave, the actors the rest but for a few
// events, the events what is left.
struct layout {
  int map, members, actors;
};

layout plan_rows(const schema::cluster_snapshot& s, int free) {
  auto share = [&](std::size_t want, int most) {
    return std::min(static_cast<int>(want), std::max(1, most));
  };
  layout l;
  l.map = share(s.owners.size(), free / 5);
  l.members = share(s.nodes.size(), free / 5);
  const int events = std::min(static_cast<int>(s.events.size()), 4); // at least
  l.actors = share(s.actors.size(), free - l.map - l.members - events);
  return l;
}

void draw(const schema::cluster_snapshot& s, const std::string& address,
          const std::string& input, const std::vector<std::string>& answer) {
  erase();
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "bamboo-inspect %s  %smodel %s  generation %llu  step %lld/%lld  loss %.4f  "
      "%.1f samples/s  redundancy %s  up %.1f s",
      address.c_str(), s.paused ? "PAUSED  " : "", s.model.c_str(),
      static_cast<unsigned long long>(s.generation), static_cast<long long>(s.step),
      static_cast<long long>(s.steps), s.loss, s.samples_per_s,
      s.redundancy.empty() ? "-" : s.redundancy.c_str(),
      static_cast<double>(s.uptime_ms) / 1000.0);
  put(0, buf, A_BOLD);
  put(1, "loss  " + sparkline(s.losses, static_cast<std::size_t>(std::max(COLS - 8, 1))));
  // Header, sparkline, four section titles, the answer and the prompt.
  const auto l = plan_rows(s, LINES - 8 - static_cast<int>(answer.size()));
  int row = 2;
  put(row++, "PIPELINE  STAGE  NODE  SHADOW", A_UNDERLINE);
  const std::size_t stages = std::max<std::uint32_t>(s.stages, 1);
  for (std::size_t c = 0; c < s.owners.size() && c < static_cast<std::size_t>(l.map);
       ++c) {
    std::snprintf(buf, sizeof buf, "%8zu  %5zu  %4s  %6s", c / stages, c % stages,
                  node_words(s.owners[c]).c_str(),
                  c < s.shadows.size() ? node_words(s.shadows[c]).c_str() : "-");
    put(row++, buf);
  }
  put(row++, "NODE  ZONE        STATE     HEARTBEAT", A_UNDERLINE);
  for (std::size_t i = 0; i < s.nodes.size() && i < static_cast<std::size_t>(l.members);
       ++i) {
    const auto& n = s.nodes[i];
    std::snprintf(buf, sizeof buf, "%4u  %-10s  %-8s  %s", n.node, n.zone.c_str(),
                  n.state.c_str(),
                  n.heartbeat_age_ms < 0
                      ? "-"
                      : (std::to_string(n.heartbeat_age_ms) + " ms ago").c_str());
    put(row++, buf, n.state == "lost" ? A_BOLD : A_NORMAL);
  }
  put(row++, "NODE  ACTOR     STAGE  STATE      MAILBOX     AGE  DOING", A_UNDERLINE);
  for (std::size_t i = 0; i < s.actors.size() && i < static_cast<std::size_t>(l.actors);
       ++i) {
    const auto& a = s.actors[i];
    std::snprintf(buf, sizeof buf, "%4s  %-8s  %5s  %-9s  %7u  %5lld ms  %s",
                  node_words(a.node).c_str(), a.kind.c_str(), node_words(a.stage).c_str(),
                  a.state.c_str(), a.mailbox, static_cast<long long>(a.age_ms),
                  a.doing.c_str());
    put(row++, buf);
  }
  put(row++, "EVENTS", A_UNDERLINE);
  const int room = LINES - 1 - static_cast<int>(answer.size()) - row;
  const auto shown =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(room, 0)), s.events.size());
  for (auto it = s.events.end() - static_cast<long>(shown); it != s.events.end(); ++it) {
    std::snprintf(buf, sizeof buf, "%9.3f s  %s",
                  static_cast<double>(it->time_ms) / 1000.0, it->text.c_str());
    put(row++, buf);
  }
  row = LINES - 1 - static_cast<int>(answer.size());
  for (const auto& a : answer)
    put(row++, a);
  put(LINES - 1, "> " + input);
  move(LINES - 1, std::min(COLS - 1, 2 + static_cast<int>(input.size())));
  refresh();
}

} // namespace

int run_console(observer& o, const std::string& address, std::chrono::milliseconds period,
                std::chrono::milliseconds timeout) {
  initscr();
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  timeout(static_cast<int>(period.count()));
  std::string input, farewell;
  std::vector<std::string> answer{"type a command: help lists them, quit leaves"};
  int code = 0;
  for (;;) {
    if (COLS < min_cols || LINES < min_rows) {
      const int cols = COLS, rows = LINES;
      endwin();
      std::fprintf(stderr,
                   "bamboo-inspect: the terminal is too small (%dx%d; the view needs "
                   "%dx%d): enlarge it, or use --json or --watch\n",
                   cols, rows, min_cols, min_rows);
      return 2;
    }
    auto s = o.snapshot(timeout);
    if (!s) {
      farewell = "the manager is gone: " + describe(s.error());
      code = 1;
      break;
    }
    draw(*s, address, input, answer);
    const int ch = getch(); // waits up to one period
    if (ch == ERR || ch == KEY_RESIZE)
      continue;
    if (ch == '\n' || ch == KEY_ENTER) {
      const auto words = split(input);
      input.clear();
      if (words.empty())
        continue;
      if (words[0] == "quit" || words[0] == "exit")
        break;
      if (words[0] == "help") {
        answer = lines(command_help() + "\nquit: leave the view");
        continue;
      }
      auto a = o.command(words, timeout);
      answer = {a ? (a->ok ? "" : "refused: ") + a->text
                  : "no answer: " + describe(a.error())};
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
      if (!input.empty())
        input.pop_back();
    } else if (ch >= 32 && ch < 127 && input.size() < 200)
      input += static_cast<char>(ch);
  }
  endwin();
  if (!farewell.empty())
    std::fprintf(stderr, "bamboo-inspect: %s\n", farewell.c_str());
  return code;
}

} // namespace bamboo::app
