// Refusals logged without letting a flood write the log: the first refusal of
// a kind from an address is logged with the peer's address and port (at most
// 16 such lines a period), repeats are counted and summarised once per period,
// a line per kind naming its addresses (or how many): a bounded number of
// lines a period however many addresses a flood comes from.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace spdlog {
class logger;
}

namespace bamboo {

class refusal_log {
public:
  using clock = std::chrono::steady_clock;
  refusal_log(std::shared_ptr<spdlog::logger> logger, std::string what,
              std::chrono::milliseconds period = std::chrono::seconds(10));
  // `host`: the peer's address without its port (repeats are counted per host).
  void note(const std::string& host, const std::string& address, const std::string& why,
            clock::time_point now);
  // Logs the repeats counted since the last summary, once a period has passed.
  void summarise(clock::time_point now, bool now_anyway = false);
  std::size_t total() const { return total_; }

private:
  // Kept small whatever the peers do: kinds past this count go under one key.
  static constexpr std::size_t max_keys = 256;
  static constexpr std::size_t max_lines = 16;
  std::size_t full_lines_ = 0;
  std::shared_ptr<spdlog::logger> logger_;
  std::string what_;
  std::chrono::milliseconds period_;
  clock::time_point last_{};
  std::map<std::pair<std::string, std::string>, std::size_t> repeats_;
  std::size_t total_ = 0;
};

} // namespace bamboo
